"""`recon4d vqa` / `recon4d ablate` on a GPU: `--device`, `--dtype`, and every tensor on the model's device.

The GPU is the fake-CUDA harness (tests.fake_cuda): tensors "on cuda" are tagged CPU
tensors and an op mixing them with CPU tensors raises. Hooks on every module of the
model record each tensor handed to it, so a test sees that the pixels, token ids,
feature-field tokens and everything built from them reached the model on its device.
(`recon4d ablate --device cuda` end to end: tests/test_ablate_internvideo2.py.)
"""

from __future__ import annotations

import json
import shutil
import typing

import pytest
import torch
from torch.utils._pytree import tree_flatten

from recon4d.commands import vqa as vqa_command
from tests import gsplat_standin
from tests.fake_cuda import fake_cuda, is_fake_cuda
from vqa_bridge.adapters import MODELS, resolve_placement

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def record_inputs(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(module name, tensor) for every tensor any submodule of ``model`` is called with, from now on."""
    seen: list[tuple[str, torch.Tensor]] = []
    for name, module in model.named_modules():
        def hook(_module, args, kwargs, name=name):
            seen.extend((name, t) for t in tree_flatten([args, kwargs])[0] if isinstance(t, torch.Tensor))
        module.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


@pytest.fixture(scope="module")
def tiny_scene(fitted_left_scene, tmp_path_factory):
    """(synth folder, scenes folder, scene) with the tiny VLM's teacher extracted and an (untrained) head for it."""
    from recon4d.scene.heads import FeatureHead
    from recon4d.scene.state import load_scene, save_scene
    from vqa_bridge.adapters.tiny import VISION_DIM

    synth, fitted = fitted_left_scene
    root = tmp_path_factory.mktemp("device_scenes")
    scene = root / fitted.name
    shutil.copytree(fitted, scene)
    assert vqa_command.main(["extract", "--scene", str(scene), "--model", "tiny", "--device", "cpu"]) == 0
    model, heads, meta = load_scene(scene / "model")
    heads["tiny"] = FeatureHead(model.latent_dim, VISION_DIM)
    save_scene(scene / "model", model, heads, meta)
    return synth, root, scene


def test_vqa_run_on_cuda_puts_the_model_and_every_input_there(tiny_scene, tmp_path, monkeypatch):
    import vqa_bridge.adapters.tiny as tiny_module

    synth, scenes, _ = tiny_scene
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(json.loads((synth / "qa.json").read_text())[:2]))
    made, seen = [], []
    real_tiny = tiny_module.tiny_adapter

    def tiny_adapter(**kwargs):
        adapter = real_tiny(**kwargs)
        made.append(adapter)
        seen.append(record_inputs(adapter.model))
        return adapter

    monkeypatch.setattr(tiny_module, "tiny_adapter", tiny_adapter)
    gsplat_standin.calls.clear()
    out = tmp_path / "run"
    with fake_cuda():
        assert vqa_command.main(["run", "--qa", str(qa), "--scenes", str(scenes), "--out", str(out),
                                 "--device", "cuda", "--modalities", "raw", "global-video", "feature-field",
                                 "--prompt", "do", "--max-new-tokens-do", "2"]) == 0
    (adapter,) = made
    assert all(is_fake_cuda(p) and p.dtype == torch.bfloat16 for p in adapter.model.parameters())
    assert adapter.threads is None  # the one-CPU-thread setting is for CPU runs
    (seen,) = seen
    assert len(seen) > 50
    stray = sorted({name for name, t in seen if not is_fake_cuda(t)})
    assert not stray, f"modules called with CPU tensors: {stray}"
    assert gsplat_standin.calls, "the global view and the feature field rendered on the GPU (gsplat)"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 3
    assert all(r["generation"]["placement"] == {"device": "cuda:0", "dtype": "bfloat16"} for r in records)


def test_dtype_and_device_options(tiny_scene, tmp_path):
    """`--dtype` overrides auto's choice; the placement is recorded; a CUDA device on a CPU machine is one line."""
    synth, scenes, _ = tiny_scene
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(json.loads((synth / "qa.json").read_text())[:1]))
    out = tmp_path / "run"
    args = ["run", "--qa", str(qa), "--scenes", str(scenes), "--out", str(out), "--modalities", "raw",
            "--prompt", "do", "--max-new-tokens-do", "2"]
    assert vqa_command.main([*args, "--device", "cpu", "--dtype", "bfloat16"]) == 0
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["generation"]["placement"] == {"device": "cpu", "dtype": "bfloat16"}
    assert '"placement": {"device": "cpu", "dtype": "bfloat16"}' in (out / "summary.md").read_text()

    assert resolve_placement("cpu") == (torch.device("cpu"), torch.float32)
    assert resolve_placement("cpu", "float16") == (torch.device("cpu"), torch.float16)
    with fake_cuda():
        assert resolve_placement() == (torch.device("cuda"), torch.bfloat16)
        assert resolve_placement("cuda:0", "float32") == (torch.device("cuda:0"), torch.float32)
    if not torch.cuda.is_available():
        assert vqa_command.main([*args, "--device", "cuda"]) == 2


def test_every_command_offers_the_adapters_models():
    """One list of model names: `vqa`, `ablate` and `batch` take exactly the models load_adapter knows."""
    from recon4d.commands.ablate import AblateCommand
    from recon4d.commands.batch import BatchCommand

    assert "internvl" in MODELS
    for cls in (vqa_command.ExtractConfig, vqa_command.RunConfig, AblateCommand):
        assert typing.get_args(typing.get_type_hints(cls)["model"]) == MODELS, cls
    literal, none = typing.get_args(typing.get_type_hints(BatchCommand)["vlm"])
    assert typing.get_args(literal) == MODELS and none is type(None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_ablate_refuses_a_missing_gpu_before_fitting(tmp_path, capsys):
    from recon4d.commands import ablate

    qa = tmp_path / "qa.json"
    qa.write_text("[]")
    out = tmp_path / "out"
    assert ablate.main(["--qa", str(qa), "--videos", str(tmp_path), "--out", str(out), "--device", "cuda"]) == 2
    assert "--device cuda" in capsys.readouterr().err and not out.exists()
