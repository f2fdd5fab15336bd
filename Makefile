# Everything a user or CI needs: `make setup`, `make demo`, `make test`.
# Each target creates or reuses the virtual environment in $(VENV).
VENV ?= .venv
PYTHON ?= python3.11
PY := $(VENV)/bin/python
STAMP := $(VENV)/.recon4d-installed

.PHONY: setup demo test bench lock clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# the pinned environment (constraints.txt), so that fits and benches compare across machines' installs
	$(PY) -m pip install --quiet --disable-pip-version-check --no-cache-dir -c constraints.txt -e '.[test,vqa]'
	# every kernel now rather than mid-fit: the CPU ones, the CUDA ones where nvcc is, gsplat's on a GPU
	$(VENV)/bin/recon4d build
	touch $(STAMP)

# The main job on the embedded default, offline on CPU: a tiny synthetic video with known
# truth, fitted into a 4D feature field and scored against that truth.
demo: setup
	$(VENV)/bin/recon4d synth --preset tiny --out out/demo/synth --motion left
	$(VENV)/bin/recon4d fit --video out/demo/synth/synth_s0 --out out/demo/fit --priors gt --teacher patch --preset cpu-preview
	$(VENV)/bin/recon4d eval --scene out/demo/fit/synth_s0

test: setup
	$(PY) -m pytest -q

bench: setup
	$(VENV)/bin/recon4d bench render
	$(VENV)/bin/recon4d bench skin
	$(VENV)/bin/recon4d bench priors
	$(VENV)/bin/recon4d bench fit

# After a deliberate upgrade inside $(VENV): pin what is installed now (keeps the header comment).
lock: setup
	{ sed -n '/^#/p' constraints.txt; $(PY) -m pip freeze --exclude-editable --disable-pip-version-check; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf out cuda_ext/.build .pytest_cache
