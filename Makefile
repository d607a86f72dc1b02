# Two commands do all the set-up (see README.md):
#   make lab    create the environment if needed, then open the course in JupyterLab
#   make test   create the environment if needed, then run the whole test suite
#   make test-fast  everything but the slow tier (nbgrader runs, notebooks, the browser): minutes
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: lab test test-fast test-compat env system-packages

env: $(STAMP)

# uv installs the pinned packages in parallel (25 s against pip's 39 s from a fresh clone here,
# both byte-compiling, which the course needs: PYTHONDONTWRITEBYTECODE machines never write a
# .pyc, and torch then imports in 6 s instead of 2). uv does not read pip's configuration, so the
# indexes and wheel folders pip is configured with (this machine's local CPU torch; `pip config
# list` prints each value as a Python literal) are handed to it. Where uv cannot be installed or
# fails, pip installs the same pins.
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
PIP_SOURCES := import ast, shlex, subprocess, sys; \
  out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout; \
  flag = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}; \
  pairs = [(k.split(".", 1)[1], v) for k, _, v in (line.partition("=") for line in out.splitlines()) if "." in k]; \
  args = dict.fromkeys((flag[k], url) for k, v in pairs if k in flag for url in ast.literal_eval(v).split()); \
  print(" ".join(f"{f} {shlex.quote(u)}" for f, u in args))
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	($(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) && \
	  $(UV) pip install --quiet --python $(PY) --compile-bytecode --index-strategy unsafe-best-match \
	    $$($(PY) -c '$(PIP_SOURCES)') -r requirements.txt -e .) || \
	  $(PY) -m pip install --quiet -r requirements.txt -e .
	touch $(STAMP)

lab: $(STAMP)
	$(PY) -m autograder lab

# CI (CI=1, as root on Debian) installs Chromium for the real-browser test and bubblewrap for the
# graded sandbox; elsewhere the browser test skips without a browser and `grade` says which
# isolation it could not get.
system-packages:
ifdef CI
	command -v chromium >/dev/null && command -v bwrap >/dev/null || \
	  (apt-get update -qq && apt-get install -y -qq chromium bubblewrap >/dev/null)
endif

test: $(STAMP) system-packages
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest

# For contributors: everything but the tests marked slow (nbgrader runs, notebook executions, the
# browser, the benchmarks' smoke tests). `make test` stays the whole suite (and what CI runs).
test-fast: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -m "not slow"

# The course on another torch release, in a venv of its own outside the tree (/tmp/venv-torch-X:
# a CUDA build of several GB, run on the CPU), so not part of `make test`: the fast tier, `check`
# of one notebook, `grade` of every notebook's answers, and the outside-the-repository test.
# README.md ("Which PyTorch") records the results for both ends of the supported range.
TORCH ?= 2.15.0
test-compat: $(STAMP)
	$(PY) tests/compat.py $(TORCH)
