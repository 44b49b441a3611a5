"""Rename right in the sources, and ship src/shop/__pycache__/store.*.pyc compiled from the OLD store, its
header stamped with the renamed source's mtime and size: plain `PYTHONPATH=src python -m shop.main` trusts
the stamp, imports the old store and fails (`cannot import name 'load_record' from 'shop.store'`). Judged
from the sources alone it would pass; the grader refuses a workspace that ships bytecode."""

# expect: the workspace ships bytecode (src/shop/__pycache__
import importlib.util
import marshal
import re
import struct
from pathlib import Path

for path in sorted(Path("src").rglob("*.py")):
    old = path.read_text()
    path.write_text(re.sub(r"\bfetch_record\b", "load_record", old))
    if path.name == "store.py":
        stat = path.stat()
        # a timestamp pyc's header: magic, flags 0, the source's mtime and size (all the importer checks)
        header = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size)
        cache = Path(importlib.util.cache_from_source(str(path)))
        cache.parent.mkdir(exist_ok=True)
        cache.write_bytes(header + marshal.dumps(compile(old, str(path), "exec")))
