"""The campaign ledger: parts and their states, the evidence that admitted them, the revert watch.

ledger.py (the file), history.py (the append-only history), evidence.py (decisions taken again),
serving.py (served defaults as a profile override), adapters.py + watch.py (the revert watch),
actions.py (the commands the CLI and the console call). docs/campaign.md is the reference.
"""
