# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test bench clean

run: $(STAMP)  ## set up and start the service on http://127.0.0.1:8000 (data in ~/.memsvc)
	$(BIN)/memsvc serve

test: $(STAMP)  ## every test (what .ci/run calls)
	$(BIN)/python -m pytest -q

bench: $(STAMP)  ## throughput and latency over HTTP with 10k and 100k items (takes ~20 min)
	$(BIN)/memsvc bench --items 10000 100000

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[local,aws,langgraph,test]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
