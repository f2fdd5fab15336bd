"""`recon4d ablate` end to end with the real InternVideo2-Chat code (the tiny checkpoint), offline.

What the Table-3 experiment runs, scaled down: a synth scene is fitted through `recon4d batch`
with InternVideo2's vision encoder distilled (Feature4X's strided clips), its global view is
rendered, and five modalities x two prompt modes are answered by the model's own Q-Former and
LLM code. The second run is the same command on a (fake) GPU: every tensor the model is handed
is on its device, the results say where it ran. Skipped without ../shared/models/internvideo2-chat-8b.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from safetensors import safe_open

from tests.internvideo2_tiny import FRAMES, build_tiny_checkpoint, real_checkpoint

os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
pytest.importorskip("ray")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

MODALITIES = ("raw", "global-video", "feature-field", "raw+cues", "geometric")
QUESTIONS = 2


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """The hub switched off here and in the Ray workers (they inherit the environment), remote code cached in tmp."""
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as mp:
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            mp.setenv(name, "1")
        mp.setenv("HF_MODULES_CACHE", str(tmp_path_factory.mktemp("modules")))
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, offline) -> tuple[Path, Path, Path, str]:
    """(tiny checkpoint, videos folder with one synth scene, question file, scene name)."""
    from tests.fitted import synth_scene

    real_checkpoint()
    checkpoint = build_tiny_checkpoint(tmp_path_factory.mktemp("internvideo2") / "tiny")
    videos = tmp_path_factory.mktemp("ablate_iv2_src")
    scene = synth_scene(videos, "--seed", "4")
    qa = videos.parent / f"{videos.name}_qa.json"
    qa.write_text(json.dumps(json.loads((scene / "qa.json").read_text())[:QUESTIONS]))
    return checkpoint, videos, qa, scene.name


def _ablate(inputs, out: Path, device: str) -> int:
    from recon4d.commands import ablate

    checkpoint, videos, qa, _ = inputs
    return ablate.main(["--qa", str(qa), "--videos", str(videos), "--out", str(out), "--num-cpus", "2",
                        "--model", "internvideo2", "--model-path", str(checkpoint), "--device", device,
                        "--n-frames", str(FRAMES), "--preset", "test", "--priors", "gt",
                        "--config.steps.static", "1", "--config.steps.scaffold", "0", "--config.steps.motion", "0",
                        "--config.steps.joint", "1", "--config.steps.features", "5",
                        "--max-new-tokens-cot", "8", "--max-new-tokens-do", "4"])


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "vqa" / "results.jsonl").read_text().splitlines()]


def test_ablate_with_the_real_internvideo2_code_on_cpu_then_gpu(inputs, tmp_path, monkeypatch):
    import vqa_bridge.adapters.internvideo2 as iv2
    from tests import gsplat_standin
    from tests.fake_cuda import fake_cuda, is_fake_cuda
    from tests.test_vlm_device import record_inputs

    _, _, _, name = inputs
    out = tmp_path / "ablation"
    assert _ablate(inputs, out, "cpu") == 0

    scene = out / "scenes" / name
    with safe_open(str(scene / "priors" / "teachers" / "internvideo2.safetensors"), framework="pt") as f:
        assert f.get_slice("features").get_shape()[1:] == [16, 16, 1408] and f.get_slice("cls").get_shape() == [1408]
    records = _records(out)
    assert {(r["modality"], r["prompt_mode"]) for r in records} == {(m, p) for m in MODALITIES for p in ("cot", "do")}
    assert len(records) == QUESTIONS * len(MODALITIES) * 2
    assert all(r["generation"]["placement"] == {"device": "cpu", "dtype": "float32"} for r in records)
    assert all(r["generation"]["model_settings"]["prompt"].startswith("[INST] <Video>") for r in records
               if r["modality"] != "geometric")
    rows = list(csv.DictReader((out / "vqa" / "ablation.csv").open()))
    assert [(r["prompt_mode"], r["modality"]) for r in rows] == [(p, m) for p in ("cot", "do") for m in MODALITIES]
    for row in rows:  # the rendered modalities carry the global view's covered share, the others none
        assert (float(row["coverage_pct"]) >= 90.0) if row["modality"] in ("global-video", "feature-field") \
            else row["coverage_pct"] == ""
    table = (out / "vqa" / "ablation.md").read_text()
    print(table)
    assert table.startswith("# VLM4D ablation: internvideo2 (cpu, float32), 1 scenes fitted")
    assert f"| {name} |" in table  # the per-scene global view line

    # The same command on a GPU, answering again: the model and all it is handed on CUDA, in bf16.
    (out / "vqa" / "results.jsonl").unlink()
    seen, real_load = [], iv2.load_internvideo2

    def load_internvideo2(*args, **kwargs):
        adapter = real_load(*args, **kwargs)
        seen.append(record_inputs(adapter.model))
        return adapter

    monkeypatch.setattr(iv2, "load_internvideo2", load_internvideo2)
    gsplat_standin.calls.clear()
    with fake_cuda():
        assert _ablate(inputs, out, "cuda") == 0
    (seen,) = seen
    assert len(seen) > 100
    stray = sorted({module for module, t in seen if not is_fake_cuda(t)})
    assert not stray, f"modules called with CPU tensors: {stray}"
    assert gsplat_standin.calls, "the global view and the feature field rendered on the GPU"
    records = _records(out)
    assert len(records) == QUESTIONS * len(MODALITIES) * 2
    assert all(r["generation"]["placement"] == {"device": "cuda:0", "dtype": "bfloat16"} for r in records)
    assert (out / "vqa" / "ablation.md").read_text().startswith("# VLM4D ablation: internvideo2 (cuda:0, bfloat16)")
