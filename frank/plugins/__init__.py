"""What runs inside vLLM's own processes, in the engine venv: the region cache, the front-end parts,
shm-idle and their token-protected control middleware. The ground floor: these modules import vLLM, its
dependencies and the standard library, never the rest of frank (a contract in pyproject.toml says so)."""
