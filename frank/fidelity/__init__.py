"""Fidelity: how far the engine's next-token distribution is from the checkpoint's reference implementation.

- measure.py: the one definition of the measure (top-64 KL with a tail bucket), a pure function.
- reference_model.py: the reference side, Hugging Face transformers in float32 on the CPU, teacher-forced; it
  runs as a subprocess in the engine venv (torch, transformers, numpy and the standard library only).
- reference.py: runs reference_model.py in the engine venv from the console side and caches its top-k.
- sets.py, make_sets.py: the shipped text sets; candidate.py: the engine side (vLLM `prompt_logprobs`);
  runs.py: runs, floors and caching. docs/fidelity.md is the reference.
"""
