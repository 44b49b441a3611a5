"""A headless command whose reader goes away (`frank ... --json | head`) ends quietly, as a shell tool does."""

from __future__ import annotations


def test_a_closed_pipe_ends_the_command_without_a_traceback(frank_cli, fresh_frank_home):
    proc = frank_cli.popen("profiles", "--json", home=fresh_frank_home, stderr=-1)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write: that write fails, every time
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141, err  # 128 + SIGPIPE, what a shell reports
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
