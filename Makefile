# iamgate developer entry points. Everything installs into .venv on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run

.PHONY: run test lint fuzz soak bench bench-scale install clean image push lock chart-test chart-tools node-test-deps \
        screenshots vendor

# The image `make image` builds; set IMAGE to your registry (docs/deployment.md).
VERSION ?= $(shell sed -n 's/^version = //p' setup.cfg)
IMAGE   ?= iamgate:$(VERSION)

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# `make run` needs the embedded store (memory://) and nothing of the test tools.
$(RUN_STAMP): $(PY) setup.cfg
	$(PY) -m pip install --quiet -e '.[embedded]'
	touch $(RUN_STAMP)

$(STAMP): $(PY) setup.cfg
	$(PY) -m pip install --quiet -e '.[test,embedded]'
	touch $(STAMP)

install: $(STAMP)

CHART_STAMP := $(VENV)/.chart-installed
$(CHART_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,embedded,chart]'
	touch $(CHART_STAMP)

## Install the chart tools (helm-python-sdk, kubernetes-validate); `make test` then runs tests/chart too.
chart-tools: $(CHART_STAMP)

## Lint, render and validate the Helm chart (charts/iamgate) with its examples.
chart-test: $(CHART_STAMP)
	IAMGATE_BCRYPT_ROUNDS=4 $(PY) -m pytest tests/chart $(PYTEST_ARGS)

## Start the control plane and a decision service on the embedded store (memory://).
## With IAMGATE_MONGODB_URI=mongodb://... also the webhook worker; IAMGATE_SECRET_KEY is then required.
## Emails are logged with their bodies (links included): IAMGATE_LOG_EMAIL_BODIES=true.
run: $(RUN_STAMP)
	IAMGATE_LOG_EMAIL_BODIES=true $(PY) -m controlplane.launcher

LINT_STAMP := $(VENV)/.lint-installed
$(LINT_STAMP): $(PY) setup.cfg
	$(PY) -m pip install --quiet -e '.[lint]'
	touch $(LINT_STAMP)

## ruff over all the Python code, mypy over shared/ and decision/ (options in pyproject.toml).
lint: $(LINT_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

## Install and run the test suite (tests/chart is skipped unless `make chart-tools` ran).
# On every core (at most 4) through pytest-xdist, a test file per worker at a time: the
# files' module fixtures (processes, browsers) start once, as in one process. XDIST=0 runs
# it in this process alone (e.g. for --pdb).
XDIST ?= -n auto --maxprocesses 4 --dist loadfile
ifeq ($(XDIST),0)
override XDIST :=
endif
test: $(STAMP)
	IAMGATE_BCRYPT_ROUNDS=4 $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

## The JavaScript libraries some tests drive (tests/node: oidc-client-ts, openid-client, axe-core), into the
## gitignored tests/node/node_modules, exactly as package-lock.json pins them.
node-test-deps:
	cd tests/node && npm ci --no-audit --no-fund

## Refresh docs/screenshots/ (every hosted page, desktop and mobile) from the browser tests;
## a plain test run writes them to a temporary folder instead.
screenshots: $(STAMP)
	IAMGATE_BCRYPT_ROUNDS=4 IAMGATE_SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(PY) -m pytest -q \
		tests/oidc/test_hosted_browser.py tests/pages/test_browser.py \
		tests/console/test_console_browser.py \
		tests/console/test_access_rules_browser.py \
		tests/console/test_integrations_browser.py \
		tests/console/test_settings_browser.py \
		tests/console/test_users_browser.py \
		tests/console/test_connections_browser.py \
		tests/console/test_first_day_browser.py \
		tests/passkeys/test_hosted_passkeys_browser.py \
		tests/console/test_passkeys_browser.py \
		tests/connections/test_hosted_connections_browser.py

## Refresh the console's vendored htmx from npm, pinned (controlplane/console/vendor/README.md
## gives the version, licence and SRI hash; update them with HTMX_VERSION).
HTMX_VERSION := 2.0.11
vendor:
	rm -rf .vendor-tmp && mkdir .vendor-tmp
	cd .vendor-tmp && npm pack --silent htmx.org@$(HTMX_VERSION) && tar xzf htmx.org-$(HTMX_VERSION).tgz
	cp .vendor-tmp/package/dist/htmx.min.js controlplane/console/vendor/htmx.min.js
	rm -rf .vendor-tmp
	@echo "htmx.org $(HTMX_VERSION) SRI: sha384-$$(openssl dgst -sha384 -binary controlplane/console/vendor/htmx.min.js | base64 -w0)"

## Schemathesis, longer profile: every operation of both OpenAPI documents, 50 examples
## per operation, credential and mode (tests/e2e/fuzz.py; `make test` runs a short one).
fuzz: $(STAMP)
	$(PY) -m tests.e2e.fuzz --profile fuzz $(FUZZ_ARGS)

## Mixed workload at bounded rates for SOAK_MINUTES (default 10); errors, p50/p99, RSS slope.
## SOAK_STORE: wire (default: the store in a process of its own, as MongoDB is) or memory (as make run).
SOAK_MINUTES ?= 10
SOAK_STORE ?= wire
soak: $(STAMP)
	$(PY) -m benchmarks.soak --minutes $(SOAK_MINUTES) --store $(SOAK_STORE)

## Load-test both processes on loopback; figures go to docs/performance.md.
## `make bench` runs every benchmark; `make bench oidc login` only those named (benchmarks/run.py).
ifeq (bench,$(firstword $(MAKECMDGOALS)))
BENCH_NAMES := $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
# The names are arguments, not targets: make has nothing to build for them.
$(eval $(BENCH_NAMES):;@:)
endif
bench: $(STAMP)
	$(PY) -m benchmarks.run $(BENCH_NAMES)

## The longer cost-as-data-grows tables (1 to 100 roles, 1 to 1,000 permissions; decision-service
## memory at 10,000 and 100,000 cached users); docs/performance.md.
bench-scale: $(STAMP)
	$(PY) -m benchmarks.scale_bench

## Build the container image (both services; the command picks which) from docker/requirements.lock.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

## Re-resolve the image's lockfiles after a change to setup.cfg's install_requires: every
## runtime package pinned with its hashes, for Linux and Python 3.11. Pins that still fit
## are kept; `make lock LOCK_ARGS=--upgrade` bumps them all to the newest that fit.
UV_VERSION ?= 0.13.9
lock: $(PY)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip compile setup.cfg --quiet --generate-hashes --python-version 3.11 \
	  --python-platform linux --custom-compile-command 'make lock' $(LOCK_ARGS) -o docker/requirements.lock
	$(VENV)/bin/uv pip compile docker/build-requirements.in --quiet --generate-hashes --python-version 3.11 \
	  --python-platform linux --custom-compile-command 'make lock' $(LOCK_ARGS) -o docker/build-requirements.lock

## Push it: make image push IMAGE=registry.example.com/iamgate:0.1.0
push:
	docker push $(IMAGE)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
