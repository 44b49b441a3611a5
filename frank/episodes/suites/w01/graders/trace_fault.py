"""Grader: answer.json names the failed request, the root-cause component and its error code, as strings."""

from frank.episodes.judge import Fail, grade, read_json

KEYS = ("request_id", "component", "code")


def check(expected):
    answer = read_json("answer.json", limit=65536)
    if not isinstance(answer, dict):
        raise Fail(f"answer.json is a {type(answer).__name__}, not an object")
    not_strings = [k for k in KEYS if type(answer.get(k)) is not str]
    if not_strings:
        raise Fail(f"answer.json: {not_strings} missing or not strings")
    wrong = [k for k in KEYS if answer[k] != expected[k]]
    if wrong:
        raise Fail(f"wrong: {wrong}")
    return "root cause found"


grade(check)
