"""A hang for a reader: answer.json is a named pipe nobody writes to."""

# expect: not a regular file
import os

os.mkfifo("answer.json")
