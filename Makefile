# Two commands are all a reader needs: `make book` and `make test`. Both create (or reuse) .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHAPTERS := $(wildcard notebooks/[0-9][0-9]_*.ipynb)
NB ?=

COLAB_VENV := .venv-colab
# Another CPU rounds differently: the generic ATen kernels, MKL in its reproducible mode, and one
# OpenMP thread stand in for "someone else's machine". Every stored output must survive them.
PORTABLE_ENV := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE OMP_NUM_THREADS=1

.PHONY: help book test test-portable lint pytest nbval execute badges student site-check colab-check clean

help:
	@echo "make book      build the site into _build/html from the committed notebooks"
	@echo "make test      ruff, pytest over tests/, nbval (strict) over every chapter"
	@echo "make test-portable  pytest and nbval again under a perturbed floating-point environment"
	@echo "make execute   re-execute chapters in place (NB=notebooks/01_vectors.ipynb for one),"
	@echo "               then rewrite badges and student versions"
	@echo "make badges    rewrite Colab badges and setup cells from _config.yml"
	@echo "make student   regenerate notebooks/student/ from the chapters"
	@echo "make site-check     build the site and check every page in headless Chromium"
	@echo "make colab-check    run every chapter with Colab's versions (ipywidgets 7.7, numpy 2.1)"

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "attnbook needs Python 3.10 or newer; found " + sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --requirement requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation --editable .
	touch $@

book: $(STAMP)
	$(BIN)/python -m tools.vendor_js
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

test: lint pytest nbval

lint: $(STAMP)
	$(BIN)/ruff check .

pytest: $(STAMP)
	$(BIN)/python -m pytest tests

nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval --nbval-current-env -p no:cacheprovider $(CHAPTERS)
	$(BIN)/python -m tools.nbval_report

# The same tests on "another machine": a cell that passes only with this machine's rounding fails here.
test-portable: $(STAMP)
	env $(PORTABLE_ENV) $(MAKE) --no-print-directory pytest nbval

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

# An environment with the versions Google Colab ships, to prove the chapters run there (and that
# their assertions hold there), under the perturbed floating-point environment of test-portable.
colab-check:
	test -x $(COLAB_VENV)/bin/python || $(PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -m pip install --quiet "ipywidgets==7.7.1" "matplotlib==3.10.*" "numpy==2.1.*" \
		"torch==2.13.0" "transformers==4.57.6" "ipykernel==6.*" nbclient pyyaml tqdm setuptools
	$(COLAB_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation --editable .
	env $(PORTABLE_ENV) $(COLAB_VENV)/bin/python -m tools.colab_check

clean:
	rm -rf _build
