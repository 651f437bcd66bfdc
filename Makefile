# iamgate developer entry points. Everything installs into .venv on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench install clean image push chart-test

# The image `make image` builds; set IMAGE to your registry (docs/deployment.md).
VERSION ?= $(shell sed -n 's/^version = //p' setup.cfg)
IMAGE   ?= iamgate:$(VERSION)

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

## Build the container image (both services; the command picks which).
image:
	docker build -t $(IMAGE) .

## Push it: make image push IMAGE=registry.example.com/iamgate:0.1.0
push:
	docker push $(IMAGE)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
