# iamgate developer entry points. Everything installs into .venv on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench install clean

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) setup.cfg
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Start the control plane and a decision service on the embedded store (memory://).
run: $(STAMP)
	$(PY) -m controlplane.launcher

## Install and run the test suite.
test: $(STAMP)
	IAMGATE_BCRYPT_ROUNDS=4 $(PY) -m pytest $(PYTEST_ARGS)

## Load-test both processes on loopback; figures go to docs/performance.md.
bench: $(STAMP)
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
