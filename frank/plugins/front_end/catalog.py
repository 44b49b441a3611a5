"""The front-end parts: name, knob, environment names, process. Pure data (the CLI and tests read it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    name: str  # as the control path, `frank bench part` and the designs call it
    knob: str  # the profile knob that switches it
    env: str  # on | off at start (the controller sets it from the knob)
    verify_env: str  # off | all | a fraction: compare against vLLM's own path
    process: str  # where it acts: api-server (live on/off), engine-core (set at start) or both (live, the
    # engine-core half always installed: it acts only on what the API-server half sends)
    title: str


PARTS: dict[str, Part] = {
    p.name: p
    for p in (
        Part(
            name="detok-tail",
            knob="detok_tail",
            env="FRANK_DETOK_TAIL",
            verify_env="FRANK_DETOK_TAIL_VERIFY",
            process="api-server",
            title="incremental detokenizer primed with the prompt tail it needs, not the whole prompt",
        ),
        Part(
            name="block-hash-memo",
            knob="block_hash_memo",
            env="FRANK_BLOCK_HASH_MEMO",
            verify_env="FRANK_BLOCK_HASH_MEMO_VERIFY",
            process="engine-core",
            title="prefix-cache block hashes memoized by (parent hash, block tokens, extra keys)",
        ),
        Part(
            name="held-prompt",
            knob="held_prompt",
            env="FRANK_HELD_PROMPT",
            verify_env="FRANK_HELD_PROMPT_VERIFY",
            process="both",
            title="prompt IDs handed to the engine core as a delta against a prompt both processes hold",
        ),
    )
}
