"""Grader: answer.txt holds the revenue exactly: currency units with two decimals, to the cent."""

import re

from frank.episodes.judge import Fail, grade, read_text


def check(expected):
    text = read_text("answer.txt", limit=4096).strip()
    if not re.fullmatch(r"[0-9]+\.[0-9]{2}", text):
        raise Fail(f"answer.txt is not a figure with two decimals like 12345.67: {text[:40]!r}")
    whole, frac = text.split(".")
    cents, want = int(whole) * 100 + int(frac), expected["answer_cents"]
    if cents != want:
        raise Fail(f"answer {text}, expected {want // 100}.{want % 100:02d}")
    return f"revenue {text}"


grade(check)
