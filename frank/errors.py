"""The one error type that headless layers raise for a problem the user can fix.

The CLI prints its message (which names the file and line, or the field) and exits non-zero; the console
shows it as a notification. Anything else is a bug and keeps its traceback.
"""


class FrankError(Exception):
    exit_code = 1
