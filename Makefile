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
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/mallocgym bench --suite default --agents all-slow,random,xla --out out/run

# two worker processes (pytest-xdist), one test file each at a time: the suite is dominated by
# numba's first compiles, which the two cores then share
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(PY) -m pytest tests/benchmarks --benchmark-only -p no:randomly

clean:
	rm -rf $(VENV) out .pytest_cache
