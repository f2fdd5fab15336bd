#!/usr/bin/env bash
# The GPU check: on a machine with one CUDA GPU, in under 10 minutes, build every kernel, run the GPU
# tests, fit one DAVIS clip with the `davis` preset, benchmark rasterize and skin on CUDA and run the VLM
# paths on CUDA with the tiny real-code InternVideo2 (`recon4d ablate --device cuda`). Every output lands in one folder (default gpu-check/, or $1).
#
#   scripts/gpu_check.sh [OUT]        # PYTHON=... to use another interpreter than .venv/bin/python
#
# CI does not need it; without a GPU it says so and exits 2.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu-check}"
PY="${PYTHON:-.venv/bin/python}"
DAVIS="${DAVIS:-../shared/data/davis}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "scripts/gpu_check.sh needs a CUDA GPU: torch.cuda.is_available() is false here (nvidia-smi: $(command -v nvidia-smi || echo none)); run it on a GPU machine" >&2
  exit 2
fi
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
export RECON4D_BUILD_DIR="${RECON4D_BUILD_DIR:-$PWD/cuda_ext/.build}"

# step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, one summary line.
step() {
  local name="$1" limit="$2"; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-10s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - start))" "$OUT/$name.log" | tee -a "$SUMMARY"
}

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
"$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.get_device_capability())" \
  > "$OUT/torch.txt" 2>&1
step build 420 "$PY" -m recon4d.cli build --gsplat yes
step tests 240 "$PY" -m pytest -q -rs tests/test_rasterize.py tests/test_skin.py tests/test_knn.py
step bench-render 120 "$PY" -m recon4d.cli bench render --quick
step bench-skin 90 "$PY" -m recon4d.cli bench skin --quick
# The VLM paths on the real GPU: recon4d ablate on a tiny synth scene with the tiny real-code InternVideo2
# (built from ../shared/models; the test suite runs the same on the CPU and on fake CUDA).
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 step vlm-cuda 240 "$PY" - "$OUT/vlm" <<'PYEOF'
import json, sys
from pathlib import Path
from recon4d.commands import ablate
from tests.fitted import synth_scene
from tests.internvideo2_tiny import build_tiny_checkpoint
out = Path(sys.argv[1])
checkpoint = build_tiny_checkpoint(out / "internvideo2-tiny")
scene = synth_scene(out / "videos", "--seed", "4")
qa = out / "qa.json"
qa.write_text(json.dumps(json.loads((scene / "qa.json").read_text())[:4]))
sys.exit(ablate.main(["--qa", str(qa), "--videos", str(out / "videos"), "--out", str(out / "ablate"),
                      "--model", "internvideo2", "--model-path", str(checkpoint), "--device", "cuda",
                      "--preset", "test", "--priors", "gt", "--max-new-tokens-cot", "8", "--max-new-tokens-do", "4"]))
PYEOF
if [ -d "$DAVIS/blackswan" ]; then
  step fit-davis 240 "$PY" -m recon4d.cli fit --video "$DAVIS/blackswan" --out "$OUT/fit" --preset davis --max-frames 24
  cp "$OUT/fit/blackswan/metrics.json" "$OUT/fit-metrics.json" 2>/dev/null
else
  echo "fit-davis  skipped: no $DAVIS/blackswan" | tee -a "$SUMMARY"
fi
echo "outputs in $OUT (summary: $SUMMARY)"
