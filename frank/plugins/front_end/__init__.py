"""The rest of the request front end: exact vLLM plugins that cut per-request work on long prompts.

One module per part, each a `vllm.general_plugins` entry point (pyproject.toml) with its own knob:

- detok_tail.py (API server): the incremental detokenizer primed with only the prompt tail it needs,
  instead of the whole prompt that vLLM decodes twice at the first output token. Live on/off.
- block_hash_memo.py (engine core): prefix-cache block hashes from a bounded memo keyed by the hash
  function's whole input, so a conversation's next turn hashes only its new blocks. Set at start.
- held_prompt.py (both): a later turn handed to the engine core as a delta against a prompt both processes
  hold, with the held prompt's block hashes. Live on/off (the engine-core half acts only on deltas).
- idle_release.py (engine core, used by held_prompt): what a request leaves behind, freed in idle time.

Shared pieces: switch.py (a part's switch, verify sampling and counters), control.py (ASGI middleware
serving /frank/parts on the API server), metrics.py (frank:front_end_* series), client.py (the controller's
side), catalog.py (the parts, their knobs and env names: what `frank bench part --list` prints).

A sibling of region_cache rather than inside it: these parts act on vLLM's own per-token work after the
prompt is tokenized (the cache acts before), in two different processes, and share one control path.
Imports only what the engine venv has (vLLM, tokenizers, prometheus_client, stdlib) where loaded by vLLM.
"""
