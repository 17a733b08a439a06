# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.run-stamp
STAMP := $(VENV)/.installed-stamp

.PHONY: run test test-ts test-console console bench-ts bench eval eval-conversations synth clean langgraph-suite

run: $(RUN_STAMP)  ## set up and start the service on http://127.0.0.1:8000 (data in ~/.memsvc)
	$(BIN)/memsvc serve

# pytest-xdist: one worker per core of the 2-core machine CI runs on. `loadgroup` hands tests out
# one by one, except the groups a conftest names (tests/infra: one synthesis, one layer resolution).
TEST_WORKERS ?= 2

# The two npm suites run side by side (one per core): each starts its own servers on free ports
# in temporary data dirs, and most of their time is spent waiting on those servers and the browser.
test: $(STAMP)  ## every test (what .ci/run calls)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup
	$(MAKE) -j2 --output-sync=target test-ts test-console

# The TypeScript client (clients/typescript): built with tsc, tested with node --test against a
# live `memsvc serve` it starts itself; its npm dependencies are pinned in its package-lock.json.
TS_CLIENT := clients/typescript

test-ts: $(STAMP) $(TS_CLIENT)/node_modules/.ci-stamp  ## the TypeScript client's tests (about 30 s)
	cd $(TS_CLIENT) && npm test

bench-ts: $(STAMP) $(TS_CLIENT)/node_modules/.ci-stamp  ## TypeScript vs Python MemsvcStore.get p95 on one server
	cd $(TS_CLIENT) && npm run bench

$(TS_CLIENT)/node_modules/.ci-stamp: $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund
	touch $@

# The console (console/): TypeScript built with tsc into memsvc/console/static/, the assets the
# Python package ships; its browser tests drive Debian's chromium against a live `memsvc serve`.
CONSOLE := console

console: $(CONSOLE)/node_modules/.ci-stamp  ## build the console into memsvc/console/static/
	cd $(CONSOLE) && npm run build

test-console: $(STAMP) $(CONSOLE)/node_modules/.ci-stamp  ## the shipped console is its source's build; its browser tests
	cd $(CONSOLE) && npm run check && npm test

$(CONSOLE)/node_modules/.ci-stamp: $(CONSOLE)/package.json $(CONSOLE)/package-lock.json
	cd $(CONSOLE) && npm ci --no-audit --no-fund
	touch $@

eval: $(STAMP)  ## retrieval quality on the golden dataset against a throwaway local server (eval-report.json)
	$(BIN)/memsvc eval --serve --report eval-report.json

eval-conversations: $(STAMP)  ## the long-conversation set's dev half, each search mode side by side (eval-conversations.json)
	$(BIN)/memsvc eval --serve --dataset eval/conversations.json --split dev --concurrency 8 --report eval-conversations.json

synth: $(STAMP) node_modules/.bin/cdk  ## CloudFormation for every environment in cdk.out/ (builds the layer; no AWS account needed), then cfn-lint
	CDK_DISABLE_VERSION_CHECK=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 npx --no-install cdk synth --quiet
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(BIN)/python -m infra.lint cdk.out/*.template.json

node_modules/.bin/cdk: package.json package-lock.json  ## the aws-cdk CLI, pinned in package-lock.json
	npm ci --no-audit --no-fund

bench: $(STAMP)  ## throughput and latency over HTTP with 10k and 100k items (over an hour on 2 cores)
	$(BIN)/python -m benchmarks.bench --items 10000 100000

# `make run` needs only the embedded default; tests and synth need everything. The packages are
# installed by uv (pinned here): the same versions as pip's under constraints.txt, in a quarter of
# the time on a fresh machine (18 s against 65 for everything `make test` needs).
UV_VERSION := 0.13.9
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python -c constraints.txt

$(RUN_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip 'uv==$(UV_VERSION)'
	$(UV_INSTALL) -e '.[local]'
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP) clients/python/pyproject.toml
	$(UV_INSTALL) -e '.[local,aws,test,infra]' -e './clients/python[langchain,mcp,openai-agents]'
	$(MAKE) langgraph-suite
	touch $(STAMP)

# LangGraph's own SQLite store tests, run against MemsvcStore by tests/langgraph_suite/conftest.py.
# They come from the pinned sdist on PyPI (MIT, see its LICENSE, kept beside them), unchanged.
LANGGRAPH_SUITE := tests/langgraph_suite/upstream
LANGGRAPH_SQLITE := langgraph-checkpoint-sqlite==3.1.1

langgraph-suite:  ## unpack LangGraph's store tests into tests/langgraph_suite/upstream
	rm -rf $(LANGGRAPH_SUITE) build/langgraph-suite
	$(BIN)/python -m pip download --quiet --no-deps --no-binary :all: -d build/langgraph-suite '$(LANGGRAPH_SQLITE)'
	mkdir -p $(LANGGRAPH_SUITE)
	tar -xzf build/langgraph-suite/*.tar.gz -C $(LANGGRAPH_SUITE) --strip-components=2 --wildcards \
	  '*/tests/test_store.py' '*/tests/test_async_store.py' '*/tests/test_ttl.py'
	tar -xzf build/langgraph-suite/*.tar.gz -C $(LANGGRAPH_SUITE) --strip-components=1 --wildcards '*/LICENSE'

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
