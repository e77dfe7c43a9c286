# Two commands are all a reader needs: `make book` and `make test`. Both create (or reuse) .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHAPTERS := $(wildcard notebooks/[0-9][0-9]_*.ipynb)
NB ?=

.PHONY: help book test lint pytest nbval execute badges student clean

help:
	@echo "make book      build the site into _build/html from the committed notebooks"
	@echo "make test      ruff, pytest over tests/, nbval (strict) over every chapter"
	@echo "make execute   re-execute chapters in place (NB=notebooks/01_vectors.ipynb for one),"
	@echo "               then rewrite badges and student versions"
	@echo "make badges    rewrite Colab badges and setup cells from _config.yml"
	@echo "make student   regenerate notebooks/student/ from the chapters"

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "attnbook needs Python 3.10 or newer; found " + sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --requirement requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation --editable .
	touch $@

book: $(STAMP)
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going

test: lint pytest nbval

lint: $(STAMP)
	$(BIN)/ruff check .

pytest: $(STAMP)
	$(BIN)/python -m pytest tests

nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval --nbval-current-env -p no:cacheprovider $(CHAPTERS)

execute: $(STAMP)
	$(BIN)/python -m tools.badges $(NB)
	$(BIN)/python -m tools.execute $(NB)
	$(BIN)/python -m tools.student $(NB)

badges: $(STAMP)
	$(BIN)/python -m tools.badges

student: $(STAMP)
	$(BIN)/python -m tools.student

clean:
	rm -rf _build
