# Two commands are all a reader needs: `make book` and `make test`. Both create (or reuse) .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHAPTERS := $(wildcard notebooks/[0-9][0-9]_*.ipynb)
NB ?=
# pytest-xdist runs test files JOBS at a time, and the chapters JOBS at a time with one thread each (their
# outputs hold with one thread: test-portable runs them so), latest chapters first since they take longest.
# The chapters that set torch to two threads run after them, one at a time: two such kernels sharing two
# cores slow each other several times over.
JOBS ?= 2
SERIAL_CHAPTERS := $(shell grep -l 'set_num_threads(2)' $(CHAPTERS))
PARALLEL_CHAPTERS := $(filter-out $(SERIAL_CHAPTERS),$(shell ls -r $(CHAPTERS)))
PYTEST_FLAGS ?=
# Tests marked slow (every student version, run top to bottom) are left out of make test; make test-slow
# runs them, and .ci/run runs the student versions in make colab-check.
PYTEST_MARK ?= not slow
# A cell that runs past this many seconds fails nbval instead of holding the run for ever: a stall guard, several
# times the slowest training cell under test-portable's generic kernels.
NBVAL_CELL_TIMEOUT ?= 1800
# A kernel started beside a busy one on two cores has taken over nbval's default 60 s to answer.
NBVAL_KERNEL_TIMEOUT ?= 300
# PyTorch's build: cpu (on Linux, PyTorch's CPU wheel: 192 MB) or cuda (PyPI's default build, which on Linux
# is the CUDA one: about 2.7 GB with its NVIDIA libraries). Read when .venv is created: rm -rf .venv to change.
TORCH ?= cpu

# Google Colab's runtime: its Python and the exact releases it ships, one file (tools/colab-versions.txt).
# The interpreter: COLAB_PYTHON if given, else python3.X on PATH, else pyenv's ~/.pyenv/versions/3.X*.
COLAB_VERSIONS := tools/colab-versions.txt
COLAB_PY := $(shell sed -n 's/^\# *Python *\([0-9][0-9.]*\) *$$/\1/p' $(COLAB_VERSIONS))
COLAB_PYTHON ?= $(firstword $(shell python$(COLAB_PY) -c 'import sys; print(sys.executable)' 2>/dev/null) \
	$(wildcard $(HOME)/.pyenv/versions/$(COLAB_PY)*/bin/python$(COLAB_PY)))
COLAB_VENV := .venv-colab$(COLAB_PY)
# Outside the checkout, so that every clone on the machine (CI's included) reuses the 2.7 GB download.
COLAB_WHEELS ?= $(HOME)/.cache/attnbook/colab-wheels
# Another CPU rounds differently: the generic ATen kernels, MKL in its reproducible mode, and one
# OpenMP thread stand in for "someone else's machine". Every stored output must survive them.
PORTABLE_ENV := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE OMP_NUM_THREADS=1

.PHONY: help book test test-slow test-portable lint pytest nbval execute badges student site-check lab-check \
	colab-check clean

help:
	@echo "make book      build the site into _build/html from the committed notebooks"
	@echo "make test      ruff, pytest over tests/ (less the slow ones), nbval (strict) over every chapter;"
	@echo "               prints how long each stage took"
	@echo "make test-slow the slow tests: every student version run top to bottom"
	@echo "make test-portable  pytest and nbval again, under a perturbed floating-point environment"
	@echo "make execute   re-execute chapters in place (NB=notebooks/01_vectors.ipynb for one),"
	@echo "               then rewrite badges and student versions"
	@echo "make badges    rewrite Colab badges and setup cells from _config.yml"
	@echo "make student   regenerate notebooks/student/ from the chapters"
	@echo "make site-check     build the site and check every page in headless Chromium"
	@echo "make lab-check      open chapter 1 in JupyterLab in headless Chromium and use its widget"
	@echo "make colab-check    run every chapter and student version with Colab's Python and releases,"
	@echo "               listed in tools/colab-versions.txt (edit that file when Colab moves)"

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "attnbook needs Python 3.11 or newer; found " + sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m tools.install_torch --torch $(TORCH)
	$(BIN)/python -m pip install --quiet --requirement requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation --editable .
	touch $@

book: $(STAMP)
	$(BIN)/python -m tools.vendor_js
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

# Each stage in turn, stopping at the first that fails, with the seconds each took.
test: $(STAMP)
	@set -e; all=$$(date +%s); for stage in lint pytest nbval; do \
		start=$$(date +%s); $(MAKE) --no-print-directory $$stage; \
		echo "make test: $$stage passed in $$(( $$(date +%s) - start )) s"; \
	done; echo "make test: all stages passed in $$(( $$(date +%s) - all )) s"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) -m slow $(PYTEST_FLAGS) tests

lint: $(STAMP)
	$(BIN)/ruff check .

# Both print the seconds each test file (each chapter) took, so that a run says where its time went.
pytest: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) -m "$(PYTEST_MARK)" -p tools.durations_by_file --durations=10 $(PYTEST_FLAGS) tests

NBVAL := $(BIN)/python -m pytest --nbval --nbval-current-env --nbval-cell-timeout=$(NBVAL_CELL_TIMEOUT) \
	--nbval-kernel-startup-timeout=$(NBVAL_KERNEL_TIMEOUT) \
	-p no:cacheprovider -p tools.durations_by_file --durations=10
nbval: $(STAMP)
	$(if $(PARALLEL_CHAPTERS),OMP_NUM_THREADS=1 $(NBVAL) -n $(JOBS) --dist loadfile $(PARALLEL_CHAPTERS))
	$(if $(SERIAL_CHAPTERS),$(NBVAL) $(SERIAL_CHAPTERS))
	$(BIN)/python -m tools.nbval_report

# The same tests on "another machine": a cell that passes only with this machine's rounding fails here.
# The slow tests (the student versions) are left to colab-check, which runs them once.
test-portable: $(STAMP)
	env $(PORTABLE_ENV) $(BIN)/python -m pytest -n $(JOBS) -m "not slow" tests
	env $(PORTABLE_ENV) $(MAKE) --no-print-directory nbval

execute: $(STAMP)
	$(BIN)/python -m tools.badges $(NB)
	$(BIN)/python -m tools.execute $(NB)
	$(BIN)/python -m tools.student $(NB)

badges: $(STAMP)
	$(BIN)/python -m tools.badges

student: $(STAMP)
	$(BIN)/python -m tools.student

site-check: book
	$(BIN)/python -m tools.site_check

# Chapter 1 opened in a real JupyterLab from .venv (loopback only) and its widget used in headless Chromium.
lab-check: $(STAMP)
	$(BIN)/python -m tools.lab_check

# Colab's environment, to prove that the chapters and the student versions run there (and that their
# assertions hold there), with the CPU kernels Colab picks (rounding on other CPUs is test-portable's
# job: its generic kernels would make the training chapters several times slower here). A venv on
# Colab's Python gets exactly Colab's releases (downloaded once into $(COLAB_WHEELS), about 2.7 GB:
# torch and its CUDA libraries; the venv is rebuilt when $(COLAB_VERSIONS) changes), then the package
# from a wheel built from the checkout, its ranges resolved against those releases, as Colab's setup
# cell installs a release.
$(COLAB_VENV)/.installed: $(COLAB_VERSIONS)
	@test -n "$(COLAB_PY)" || { echo "colab check: no '# Python X.Y' line in $(COLAB_VERSIONS)" >&2; exit 1; }
	@test -n "$(COLAB_PYTHON)" || { echo "colab check: needs Python $(COLAB_PY), the Python Colab runs" \
		"($(COLAB_VERSIONS)), and found none (python$(COLAB_PY) on PATH, ~/.pyenv/versions/$(COLAB_PY)*)." \
		"Install it (pyenv install $(COLAB_PY)) or name it: make colab-check COLAB_PYTHON=/path/to/python$(COLAB_PY)" >&2; exit 1; }
	rm -rf $(COLAB_VENV)
	$(COLAB_PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -m pip download --quiet --dest $(COLAB_WHEELS) --requirement $(COLAB_VERSIONS) nbclient
	$(COLAB_VENV)/bin/python -m pip install --quiet --no-index --find-links $(COLAB_WHEELS) \
		--requirement $(COLAB_VERSIONS) nbclient
	touch $@

colab-check: $(COLAB_VENV)/.installed
	rm -f dist/attnbook-*.whl
	$(COLAB_VENV)/bin/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	$(COLAB_VENV)/bin/python -m pip uninstall --quiet --quiet --yes attnbook
	$(COLAB_VENV)/bin/python -m pip install --quiet dist/attnbook-*.whl --constraint $(COLAB_VERSIONS)
	$(COLAB_VENV)/bin/python -m tools.colab_check

clean:
	rm -rf _build
