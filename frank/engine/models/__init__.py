"""Models frank builds itself, offline and fingerprinted (the tiny random-weight Llama and its corpus)."""
