"""Self-contained HTML pages (page.py) and the plots they embed (plots.py, matplotlib from the `report` extra)."""
