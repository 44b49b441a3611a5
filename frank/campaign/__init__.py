"""The campaign ledger: parts and their states, the evidence that admitted them, the revert watch.

parts.py (the campaign file's parser), ledger.py (the append-only history: where the ledger is written, and
each part's state read back from it), evidence.py (decisions taken again), serving.py (served defaults as a
profile override), adapters.py + watch.py (the revert watch), actions.py (the commands the CLI and the
console call; status only reads). docs/campaign.md is the reference.
"""
