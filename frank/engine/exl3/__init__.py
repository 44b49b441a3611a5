"""frank's thin HTTP adapter over exllamav3's own generator: the OpenAI API frank's replays, agents and
fidelity measure talk to, served by exllamav3 (docs/exl3.md says why not TabbyAPI).

    server.py       the HTTP side: /v1/chat/completions (streaming, tools), /v1/completions (prompt
                    log-probabilities as vLLM answers them), /tokenize, /v1/models, /health, /metrics
    generator.py    what the HTTP side asks of a generator (a Protocol) and what it gets back
    exl3_generator.py  that layer over exllamav3 (model_init, Generator, Job): needs CUDA
    fake_no_cuda.py    a stand-in for tests on a machine without CUDA, where exllamav3 cannot run
    metrics.py      the Prometheus families, by vLLM's names (the names frank's metrics layer reads)
    tools.py        tool calls out of the model's text (the chat template's own format)
    ext_check.py    the compiled extension checked before use: libstdc++ linked in statically is refused
    prof_log.py     exllamav3's own EXL3_MOE_CPU_PROF / EXL3_SPLIT_PROF figures, read from the engine log

Runs in exllamav3's python: the standard library, prometheus_client and exllamav3 only, nothing else of
frank (an import-linter contract in pyproject.toml).
"""
