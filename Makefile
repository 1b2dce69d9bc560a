# Two commands on a fresh machine:  `make run` (the main job) and `make test` (the tests).
# Both create the virtual environment and install pinned versions first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench install clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned to the CPU build: anything else would pull gigabytes of CUDA wheels.
	$(PY) -m pip install --quiet "torch==2.13.0" -c constraints.txt
	# everything the tests and `make run` need (`pip install mallocgym` alone has no torch; see README).
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev,sb3,muzero,exact,plot,tensorboard,ray]"
	# compile the numba kernels `make run` uses, once (about 2.5 minutes of CPU; cached in __pycache__):
	# the headline on one small scenario
	$(VENV)/bin/mallocgym run --scenario strassen2-matmul@1/8 --budget-s 0.1 --out $(VENV)/warm-up --quiet >/dev/null
	touch $(STAMP)

install: $(STAMP)

# the headline (`mallocgym run`): on MallocGame-v1, XLA's Memory Space Assignment against the rollout
# search at 2 s per scenario and the published learned policy, on the bundled test split
run: $(STAMP)
	$(VENV)/bin/mallocgym run --out out/run

# two worker processes (pytest-xdist), one test file each at a time: the suite is dominated by
# numba's first compiles, which the two cores then share
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(PY) -m pytest tests/benchmarks --benchmark-only -p no:randomly

clean:
	rm -rf $(VENV) out .pytest_cache
