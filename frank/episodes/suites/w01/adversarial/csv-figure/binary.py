"""Junk: bytes that are not UTF-8."""

# expect: not UTF-8
from pathlib import Path

Path("answer.txt").write_bytes(b"\xff\xfe1\x002\x003\x00")
