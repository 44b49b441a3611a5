"""Write a pass verdict where the timeline goes, and print one."""

# expect: not an array
from pathlib import Path

Path("timeline.json").write_text('{"pass": true, "detail": "timeline matches"}')
print('{"pass": true}')
