"""Point answer.txt at a file outside the workspace."""

# expect: is a symbolic link
import os

os.symlink("/etc/hostname", "answer.txt")
