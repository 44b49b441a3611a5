"""The right keys with values of the wrong type."""

# expect: missing or not strings
from pathlib import Path

Path("answer.json").write_text('{"request_id": ["6df3e400"], "component": {"name": "payments-db"}, "code": 9844}')
