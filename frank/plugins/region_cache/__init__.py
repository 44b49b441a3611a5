"""The prompt region cache: region text -> token IDs, loaded inside the vLLM API server.

- core.py: pure. Split a rendered prompt at the tokenizer's special tokens, encode each region on its own,
  a bounded thread-safe LRU keyed by the region text, verify and fallback.
- composition.py: what each returned ID list was joined from (the cache's region lists, by identity), so
  held-prompt can compare a new prompt with the previous turn's region by region.
- runtime.py: the one process-wide cache and its on/off switch (what the hook and the control use).
- plugin.py: the `vllm.general_plugins` entry point; hooks the API server's tokenizer path (and skips
  vLLM's vocabulary check for the IDs the cache hands on, only those).
- control.py: ASGI middleware serving /frank/region-cache (stats, on/off, clear) behind the control token.
- metrics.py: a prometheus_client Collector: frank:region_cache_* series on the API server's /metrics.
- client.py: the controller's httpx client for that endpoint (console side).

Environment (read once, in the API server process):
  FRANK_REGION_CACHE             on | off: the switch at start (the controller sets it from the knob)
  FRANK_REGION_CACHE_MAX_TOKENS  LRU bound on token IDs held (default 8,000,000)
  FRANK_REGION_CACHE_MAX_BYTES   LRU bound on estimated bytes held (default 256 MiB)
  FRANK_REGION_CACHE_VERIFY      off (default) | all | a fraction such as 0.05: prompts re-checked against a
                                 fresh encode; a mismatch returns the fresh IDs, is counted, refuses the cache
  FRANK_REGION_CACHE_HOOK        0 leaves vLLM completely untouched (the plugin installs nothing)
  FRANK_CONTROL_TOKEN            the control endpoint's token (empty: the endpoint refuses everything)

Imports only what the engine venv has (vLLM, tokenizers, transformers, prometheus_client, stdlib).
"""
