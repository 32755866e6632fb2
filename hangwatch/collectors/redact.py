"""Keep secrets out of snapshots and reports: tokens in the environment, passwords in URLs,
`--token VALUE` on command lines, and well-known token shapes anywhere in text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

REDACTED = "<redacted>"

# An environment variable whose name says it holds a secret is hidden whatever its value.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW(?:OR)?D|CREDENTIAL|AUTH|COOKIE", re.I)
_SECRET_WORD = r"(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|private[_-]?key)"

_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^/@\s\"']+@", re.I)
# NAME=VALUE or NAME: VALUE; a purely numeric value (max_tokens=4096) is no secret.
_ASSIGNED = re.compile(
    rf"(?P<name>\b[\w.-]*{_SECRET_WORD}[\w.-]*)(?P<sep>[\"']?\s*[=:]\s*[\"']?)"
    r"(?P<value>(?!\d+\b)(?!<redacted>)[^\s\"',;}]+)",
    re.I,
)
# `--hf-token VALUE` on a command line.
_FLAG_VALUE = re.compile(
    rf"(?P<name>(?:^|\s)--?[\w-]*{_SECRET_WORD}[\w-]*)(?P<sep>\s+)(?P<value>(?!-)(?!<redacted>)\S+)",
    re.I,
)
_BEARER = re.compile(r"\b(?P<name>bearer|basic)(?P<sep>\s+)(?!<redacted>)[\w.~+/=-]{8,}", re.I)
_TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[A-Za-z0-9_-]{16,}"
    r"|xox[abposr]-[\w-]{10,}|AKIA[0-9A-Z]{16}|glpat-[\w-]{20,})"
)


def redact_text(text: str) -> str:
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    text = _ASSIGNED.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _FLAG_VALUE.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def redact_env_value(name: str, value: str) -> str:
    return REDACTED if SECRET_NAME.search(name) else redact_text(value)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Redact a command line item by item: a secret-named flag hides the item after it."""
    out: list[str] = []
    hide_next = False
    for item in argv:
        if hide_next and not item.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = bool(re.fullmatch(rf"--?[\w-]*{_SECRET_WORD}[\w-]*", item, re.I))
        out.append(redact_text(item))
    return out


def redact_tree(value: Any) -> Any:
    """Every string inside nested dicts and lists, redacted: the last line of defence before a
    report is written."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v) for v in value]
    return value
