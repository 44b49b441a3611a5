"""Junk: bytes that are not UTF-8."""

# expect: not UTF-8
from pathlib import Path

Path("answer.json").write_bytes(b'{"request_id": "\xff\xfe\x00", "component": "\x80", "code": "E1"}')
