"""Fidelity: how far the engine's next-token distribution is from the checkpoint's reference implementation.

- `measure`: the one definition of the measure (top-64 KL with a tail bucket), a pure function.
- `reference`: the reference side, Hugging Face transformers in float32 on the CPU, teacher-forced; it runs
  as a subprocess in the engine venv (torch, transformers, numpy and the standard library only).

The text sets, the candidate side (vLLM `prompt_logprobs`), runs, floors and caching live in
replays/fidelity/; see docs/fidelity.md.
"""
