"""The one error type that headless layers raise for a problem the user can fix.

The CLI prints its message (which names the file and line, or the field) and exits non-zero; the console
shows it as a notification. Anything else is a bug and keeps its traceback.
"""


class FrankError(Exception):
    exit_code = 1


class WriteError(FrankError, OSError):
    """A record or state file could not be written (a full disk, say); the message names the file, and what
    the file held before is kept. An OSError too, for the callers that already handle one."""
