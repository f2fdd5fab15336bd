"""The CUDA path, proven on the CPU: the fake-CUDA harness (tests.fake_cuda) and the gsplat stand-in.

Every test runs code as it would run on a one-GPU machine: tensors "on cuda" are CPU tensors
tagged as CUDA, an op that mixes them with CPU tensors raises, and host syncs are counted.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
import torch

from recon4d.fit.trainer import FitConfig, StageSteps, Trainer
from recon4d.scene.data import load_scene_data
from recon4d.scene_folder import FIT_STAGES as STAGES
from tests import gsplat_standin
from tests.conftest import poison_loss
from tests.fake_cuda import DeviceMixError, fake_cuda, is_fake_cuda

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _two_steps_config(backend: str = "auto") -> FitConfig:
    """Two steps of every stage (one per frame for the per-frame stages), a refinement at the joint stage's
    second step that grows every Gaussian (gradient threshold 0) and prunes the faintest."""
    steps = StageSteps(static=2, scaffold=2, motion=1, joint=3, cameras=1, nodes=1, settle=2, features=2)
    cfg = FitConfig(steps=steps, checkpoint_every=1000, backend=backend)
    cfg.init.static_stride = 6
    cfg.densify = dataclasses.replace(cfg.densify, refine_every=2, start_fraction=0.0, stop_fraction=1.0,
                                      grow_grad2d=0.0, prune_opacity=0.5)
    return cfg


@pytest.fixture
def ssim_twin_on_the_cpu_too(monkeypatch):
    """The losses' SSIM from its PyTorch twin on the CPU as well: a GPU has no SSIM kernel and runs the twin,
    so with it on both sides only the device differs (the kernel against the twin: tests/test_ssim.py)."""
    from cuda_ext.ssim import ssim_mean
    from recon4d.fit import losses

    monkeypatch.setattr(losses, "ssim_mean", functools.partial(ssim_mean, backend="torch"))


def _stages_run(trainer: Trainer) -> set[str]:
    return {stage for stage in STAGES if trainer._stage_steps(stage)}


def test_a_fit_on_a_gpu_keeps_every_tensor_there_and_equals_the_cpu_fit(fitted_left_scene, tmp_path,
                                                                        ssim_twin_on_the_cpu_too):
    """Init and every stage on CUDA-tagged tensors with no device mix (the harness raises on one),
    densification included; the result equals the CPU fit's, since only the device differs."""
    _, scene = fitted_left_scene
    data = load_scene_data(scene)
    assert data.teachers, "the fixture's scene has a teacher, so the features stage runs"
    cpu = Trainer(data, _two_steps_config(backend="cpu"), tmp_path / "cpu", log=lambda _: None)
    cpu.initialise()
    cpu.run()
    gsplat_standin.calls.clear()
    with fake_cuda():
        gpu = Trainer(data, _two_steps_config(), tmp_path / "gpu", log=lambda _: None)
        assert gpu.device.type == "cuda"
        gpu.initialise()
        n_init = gpu.n_gaussians()
        assert _stages_run(gpu) == set(STAGES)
        gpu.run()
        assert gpu.stage == "done"
        assert all(is_fake_cuda(p) for p in gpu.scene.parameters())
        assert all(is_fake_cuda(b) for b in gpu.scene.buffers())
    assert gsplat_standin.calls, "CUDA tensors are rasterized by gsplat"
    assert max(c["channels"] for c in gsplat_standin.calls) == 4 + 32 + 1  # the features stage: latents + depth
    assert all(c["channels"] <= c["chunk"] for c in gsplat_standin.calls)  # each render one gsplat pass
    assert min(c["channels"] for c in gsplat_standin.calls) == 4 + 1  # no latents where none is rendered
    assert gpu.n_gaussians() != n_init  # the forced refinement grew and pruned
    assert gpu.n_gaussians() == cpu.n_gaussians()
    for (name, a), (_, b) in zip(cpu.scene.named_parameters(), gpu.scene.named_parameters(), strict=True):
        torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-5, atol=1e-6, msg=name)


def test_a_joint_step_on_a_gpu_waits_for_the_host_at_most_three_times(fitted_left_scene, tmp_path):
    _, scene = fitted_left_scene
    data = load_scene_data(scene)
    data.teachers = {}
    cfg = FitConfig(steps=StageSteps(static=1, scaffold=1, motion=0, joint=40, cameras=0, settle=0, features=0))
    cfg.init.static_stride = 6  # densification as configured: no refinement in these steps
    with fake_cuda() as mode:
        trainer = Trainer(data, cfg, tmp_path / "model", log=lambda _: None)
        trainer.initialise()
        trainer.run(stop_after="scaffold")
        assert trainer.stage == "joint"
        trainer._one_step(40)  # the first step binds the tracks to the scaffold, once
        before = mode.syncs
        for _ in range(20):
            trainer._one_step(40)
    per_step = (mode.syncs - before) / 20
    assert per_step <= 3, mode.sync_log[before:]


def test_a_gpu_fit_catches_a_nan_and_rolls_back(fitted_left_scene, tmp_path, monkeypatch):
    """With the finiteness checks deferred (one device read every few steps), a NaN loss still rolls back."""
    _, scene = fitted_left_scene
    data = load_scene_data(scene)
    data.teachers = {}
    cfg = _two_steps_config()
    cfg.steps = StageSteps(static=12, scaffold=0, motion=0, joint=0, cameras=0, settle=0, features=0)
    cfg.checkpoint_every, cfg.check_every = 4, 5
    messages = []
    with fake_cuda():
        trainer = Trainer(data, cfg, tmp_path / "model", log=messages.append)
        trainer.initialise()
        poison_loss(trainer, monkeypatch, 6)
        trainer.run()
    assert trainer.stage == "done" and trainer.lr == pytest.approx(0.5)
    assert any("rolled back" in m for m in messages)
    assert all(torch.isfinite(p).all() for p in trainer.scene.parameters())


def test_render_and_the_feature_field_run_on_the_gpu(fitted_left_scene, tmp_path):
    """`recon4d render` and the feature-field input of the VQA bridge render with gsplat on CUDA tensors and
    give what the CPU gives."""
    from recon4d.commands import render as render_command
    from vqa_bridge.modalities import SceneInputs

    _, scene = fitted_left_scene
    args = ["--scene", str(scene), "--path", "input", "--frames", "0:3", "--force"]
    assert render_command.main([*args, "--out", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    cpu_field = SceneInputs(scene, "patch").build("feature-field", [0, 2])
    gsplat_standin.calls.clear()
    with fake_cuda():
        assert render_command.main([*args, "--out", str(tmp_path / "gpu")]) == 0
        inputs = SceneInputs(scene, "patch")
        assert is_fake_cuda(inputs.fitted().scene.static.means)
        gpu_field = inputs.build("feature-field", [0, 2])
    assert gsplat_standin.calls
    read = lambda d: json.loads((tmp_path / d / "cameras.json").read_text())["summary"]["psnr"]  # noqa: E731
    assert read("gpu") == pytest.approx(read("cpu"), abs=1e-4)
    torch.testing.assert_close(gpu_field.grid, cpu_field.grid, rtol=1e-4, atol=1e-5)


def test_a_batch_worker_fits_on_the_gpu_with_the_gpu_preset(tmp_path):
    """The worker of `recon4d batch` picks ``config_on_gpu`` on a GPU machine and fits there."""
    from recon4d.batch.worker import FitTask, fit_scene_task
    from recon4d.fit.presets import load_preset
    from tests.fitted import synth_scene

    synth = synth_scene(tmp_path / "synth", "--motion", "left", "--seed", "3")
    tiny = load_preset("test")
    tiny.steps = StageSteps(static=2, scaffold=2, motion=1, joint=2, cameras=1, settle=1, features=0)
    marked = dataclasses.replace(tiny, seed=7)  # which config the worker used shows in config.json
    task = FitTask(scene_dir=tmp_path / "out" / synth.name, source=synth, config=tiny, config_on_gpu=marked,
                   priors="gt", run_id="test")
    with fake_cuda():
        result = fit_scene_task(task)
    assert result["metrics"]["stage"] == "done"
    saved = json.loads((tmp_path / "out" / synth.name / "model" / "scene.json").read_text())
    assert saved["config"]["seed"] == 7


def test_batch_sends_auto_to_the_workers(monkeypatch, tmp_path):
    """On a CPU-only driver, `--preset auto` sends both presets; the choice is the worker's."""
    import recon4d.batch.runner as runner
    from recon4d.commands import batch as batch_command
    from recon4d.fit.presets import AUTO_PRESETS, load_preset

    sent = {}

    def fake_run_batch(specs, opts):
        sent["opts"] = opts
        raise SystemExit(0)

    monkeypatch.setattr(runner, "run_batch", fake_run_batch)
    (tmp_path / "a.mp4").write_bytes(b"")
    monkeypatch.setattr("recon4d.batch.inputs.discover", lambda path: [])
    assert not torch.cuda.is_available()
    with pytest.raises(SystemExit):
        batch_command.main(["--inputs", str(tmp_path), "--preset", "auto", "--config.seed", "5"])
    opts = sent["opts"]
    cpu, gpu = (load_preset(AUTO_PRESETS[k]) for k in ("cpu", "gpu"))
    assert opts.config.steps == cpu.steps and opts.config_on_gpu.steps == gpu.steps
    assert opts.config.seed == opts.config_on_gpu.seed == 5  # overrides reach both
    with pytest.raises(SystemExit):
        batch_command.main(["--inputs", str(tmp_path), "--preset", "davis"])
    assert sent["opts"].config_on_gpu is None and sent["opts"].config.steps == gpu.steps


def _fit_cli(synth: Path, out: Path, *extra: str) -> int:
    from recon4d.commands import fit as fit_command

    return fit_command.main(["--video", str(synth), "--out", str(out), "--priors", "gt", "--preset", "test", *extra])


def test_a_gpu_without_gsplat_kernels_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    from tests.fitted import synth_scene

    synth = synth_scene(tmp_path / "synth", "--seed", "2")
    capsys.readouterr()
    with fake_cuda():
        monkeypatch.setattr(gsplat_standin.cuda._backend, "_C", None)  # no toolkit: gsplat could not build
        assert _fit_cli(synth, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nvcc" in err[0] and "recon4d build" in err[0], err
    assert not (tmp_path / "out" / synth.name / "priors").exists()  # refused before any work


def test_an_unusable_gpu_driver_is_one_line_and_exit_2_not_a_cpu_fit(tmp_path, capsys, monkeypatch):
    import recon4d.device as device
    from tests.fitted import synth_scene

    synth = synth_scene(tmp_path / "synth", "--seed", "2")
    capsys.readouterr()
    driver = tmp_path / "nvidia-version"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023\n")
    monkeypatch.setattr(device, "NVIDIA_DRIVER_FILE", driver)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _fit_cli(synth, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "535.104.05" in err[0] and "--device cpu" in err[0], err
    assert _fit_cli(synth, tmp_path / "out", "--config.device", "cuda") == 2


def test_the_harness_catches_a_device_mix():
    """The harness itself: a mix raises, a 0-d CPU scalar does not, host reads are counted."""
    with fake_cuda() as mode:
        x = torch.ones(3, device="cuda")
        with pytest.raises(DeviceMixError):
            x + torch.ones(3)
        y = x * torch.tensor(2.0)
        assert y.device.type == "cuda" and is_fake_cuda(y)
        before = mode.syncs
        float(y.sum())
        assert mode.syncs == before + 1
        with pytest.raises(TypeError):
            y.numpy()
        assert not is_fake_cuda(y.cpu())
        layer = torch.nn.Linear(3, 2).to(device="cuda", dtype=torch.bfloat16)  # Module.to, keyword form
        assert is_fake_cuda(layer.weight) and layer.weight.dtype == torch.bfloat16


def test_a_refinement_can_keep_the_optimiser_state(fitted_left_scene, tmp_path):
    """``keep_optimizer_state`` (the GPU presets): after a refinement, a surviving Gaussian keeps its Adam
    moments, a new one starts at zero; the scaffold's moments are untouched."""
    _, scene = fitted_left_scene
    data = load_scene_data(scene)
    data.teachers = {}
    cfg = _two_steps_config()
    cfg.steps = StageSteps(static=1, scaffold=1, motion=0, joint=4, cameras=0, settle=0, features=0)
    cfg.densify = dataclasses.replace(cfg.densify, refine_every=3, keep_optimizer_state=True)
    with fake_cuda():
        trainer = Trainer(data, cfg, tmp_path / "model", log=lambda _: None)
        trainer.initialise()
        trainer.run(stop_after="scaffold")
        for _ in range(3):
            trainer._one_step(4)
        seen = {}
        refine = trainer.densifier.observe_and_refine

        def snapshot_then_refine(*args):  # the moments after the step's update, just before the refinement
            state = trainer.optimizer.state
            seen["means"] = state[trainer.scene.static.means]["exp_avg"].clone()
            seen["nodes"] = state[trainer.scene.scaffold.node_offsets]["exp_avg_sq"].clone()
            seen["n"] = len(trainer.scene.static)
            return refine(*args)

        trainer.densifier.observe_and_refine = snapshot_then_refine
        trainer._one_step(4)  # step 3: the refinement
        means_before, nodes_before, n_before = seen["means"], seen["nodes"], seen["n"]
        rows, kept = trainer.densifier.rows[id(trainer.scene.static.means)]
        after = trainer.optimizer.state[trainer.scene.static.means]["exp_avg"]
        assert is_fake_cuda(after) and len(after) == len(trainer.scene.static) != n_before
        torch.testing.assert_close(after[:kept], means_before[rows[:kept]], rtol=0, atol=0)
        assert (after[kept:] == 0).all() and kept < len(after)
        torch.testing.assert_close(trainer.optimizer.state[trainer.scene.scaffold.node_offsets]["exp_avg_sq"],
                                   nodes_before, rtol=0, atol=0)


def test_depth_anything_runs_on_the_gpu(tmp_path, monkeypatch):
    import numpy as np

    from recon4d.priors.depth import DepthAnythingV2
    from tests.test_priors_depth import tiny_depth_anything

    provider = DepthAnythingV2(str(tiny_depth_anything(tmp_path / "da")))
    frames = np.random.default_rng(0).integers(0, 255, (2, 48, 64, 3), dtype=np.uint8)
    cpu, _ = provider.estimate(frames, progress=False)
    loaded = []
    real_load = DepthAnythingV2.load
    monkeypatch.setattr(DepthAnythingV2, "load", lambda self: loaded.append(real_load(self)) or loaded[-1])
    with fake_cuda():
        gpu, _ = provider.estimate(frames, progress=False)
    assert is_fake_cuda(next(loaded[0][1].parameters()))  # the model ran on the GPU
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-6)


def test_a_gpu_checkpoint_resumes_on_a_cpu_machine(fitted_left_scene, tmp_path, ssim_twin_on_the_cpu_too):
    """A fit checkpointed on a GPU continues on a laptop (the checkpoint is read to the CPU) and ends where
    the same fit run on the CPU throughout ends."""
    from recon4d.fit.trainer import fit_scene

    _, scene = fitted_left_scene
    data = load_scene_data(scene)
    data.teachers = {}
    with fake_cuda():
        part = fit_scene(data, _two_steps_config(), tmp_path / "moved", log=lambda _: None, stop_after="joint")
        assert part.stage == "cameras" and part.device.type == "cuda"
    resumed = fit_scene(data, _two_steps_config(backend="cpu"), tmp_path / "moved", resume=True, log=lambda _: None)
    whole = fit_scene(data, _two_steps_config(backend="cpu"), tmp_path / "cpu", log=lambda _: None)
    assert resumed.stage == whole.stage == "done" and resumed.device.type == "cpu"
    for (name, a), (_, b) in zip(whole.scene.named_parameters(), resumed.scene.named_parameters(), strict=True):
        torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without a GPU")
def test_the_gpu_check_says_it_needs_a_gpu(tmp_path):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run(["bash", str(repo / "scripts" / "gpu_check.sh"), str(tmp_path / "out")],
                          capture_output=True, text=True, env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_pytorch_twin_renders_on_a_gpu_without_gsplat(monkeypatch):
    """``backend="torch"`` is the fallback on a GPU whose gsplat kernels cannot be built: it runs there,
    gradients included, and renders what it renders on the CPU."""
    from recon4d.render import rasterize
    from tests.test_rasterize import random_scene

    scene = random_scene(300, 4)
    cpu = rasterize(*scene, backend="torch")
    with fake_cuda():
        monkeypatch.setattr(gsplat_standin.cuda._backend, "_C", None)
        gpu_scene = [t.cuda().requires_grad_(i < 5) if torch.is_tensor(t) else t for i, t in enumerate(scene)]
        out = rasterize(*gpu_scene, backend="torch")
        out.features.sum().backward()
        assert is_fake_cuda(out.features) and is_fake_cuda(gpu_scene[0].grad)
    torch.testing.assert_close(out.features.detach(), cpu.features, rtol=0, atol=0)


def test_export_on_a_gpu_machine_writes_from_host_memory(fitted_left_scene, tmp_path):
    from recon4d.commands import export as export_command

    _, scene = fitted_left_scene
    with fake_cuda():
        assert export_command.main(["--scene", str(scene), "--out", str(tmp_path / "export"), "--frames", "0:2"]) == 0
    assert (tmp_path / "export" / "static.ply").stat().st_size > 0
