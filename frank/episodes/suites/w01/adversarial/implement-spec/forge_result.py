"""Write a made-up result on every descriptor the probe might answer on, then end the process."""

# expect: the code gave no result
from pathlib import Path

Path("timeutil/durations.py").write_text(
    "import json, os, __main__\n"
    "_fake = json.dumps({'cases': [{'raised': 'ValueError', 'value_error': True} for _ in __main__._INPUT]})\n"
    "for fd in range(1, 10):\n    try:\n        os.write(fd, _fake.encode())\n    except OSError:\n        pass\n"
    "os._exit(0)\n"
)
