# Strata: `make run` starts the app on the sample corpus (offline backend); `make test` runs every test.
# Both install what is missing first: a virtualenv with the pinned packages, and Debian's chromium for tests.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
PORT ?= 8501
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export STRATA_HOME ?= $(CURDIR)/workspaces
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: install chromium run test test-fast bench clean

install: $(STAMP)

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; }

run: install
	$(BIN)/streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT)

test: install chromium
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m "not e2e"

bench: install
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache
