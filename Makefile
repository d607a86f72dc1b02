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

# torch and Triton (a third of the install: unpacking and compiling) install beside the rest, each
# pip on a core of its own; nothing else depends on them, so the two never install the same
# package. The last pip resolves the whole (torch's own dependencies) and installs the course.
BIG := ^(torch|triton)==
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	grep -E '$(BIG)' requirements.txt > $(VENV)/big.txt
	grep -vE '$(BIG)' requirements.txt > $(VENV)/rest.txt
	$(PY) -m pip install --quiet --no-deps -r $(VENV)/big.txt & big=$$!; \
	  $(PY) -m pip install --quiet -r $(VENV)/rest.txt; rest=$$?; \
	  wait $$big && test $$rest = 0
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
