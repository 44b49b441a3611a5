"""Write a pass verdict where the answer goes, and print one."""

# expect: missing or not strings
from pathlib import Path

Path("answer.json").write_text('{"pass": true, "detail": "root cause found"}')
print('{"pass": true, "detail": "root cause found"}')
