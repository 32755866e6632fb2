"""Keep secrets out of everything hangwatch writes: tokens in the environment, passwords in
URLs, `--token VALUE` and `Authorization:` headers on command lines, webhook URLs, and the
shapes of well-known tokens anywhere in text (a job that prints its own key into its log).

`redact_text` is the one function every output calls on text it did not write itself;
`redact_url` is for a URL hangwatch itself sends to (a webhook), shown in messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

REDACTED = "<redacted>"

# An environment variable whose name says it holds a secret is hidden whatever its value...
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW(?:OR)?D|CREDENTIAL|AUTH|COOKIE|SIGNATURE", re.I)
# ...except the variables a person debugging a distributed job must read (NCCL_IB_PKEY is a
# partition number, not a key). Their values still go through `redact_text`.
READABLE_NAME = re.compile(r"(?:TORCH_)?NCCL_\w*|MASTER_\w*|GLOO_\w*", re.I)
# `tokenizer` and `tokens` name no secret.
_SECRET_WORD = (r"(?:token(?!i[sz]|s\b)|secret|passw(?:or)?d|api[_-]?key|access[_-]?key"
                r"|private[_-]?key)")
_NOT_DONE = rf"(?!{re.escape(REDACTED)})"

_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^/@\s\"'<>]+@", re.I)
# NAME=VALUE or NAME: VALUE; a purely numeric value (max_tokens=4096) is no secret.
_ASSIGNED = re.compile(
    rf"(?P<name>\b[\w.-]*{_SECRET_WORD}[\w.-]*)(?P<sep>[\"']?\s*[=:]\s*[\"']?)"
    rf"(?P<value>(?!\d+\b){_NOT_DONE}[^\s\"',;}}&]+)",
    re.I,
)
# `--hf-token VALUE` on a command line.
_FLAG_VALUE = re.compile(
    rf"(?P<name>(?:^|\s)--?[\w-]*{_SECRET_WORD}[\w-]*)(?P<sep>\s+)(?P<value>(?!-){_NOT_DONE}\S+)",
    re.I,
)
# `Authorization: Bearer X`, `-H 'Authorization: token X'`, and a bare `Bearer X`.
_AUTH_HEADER = re.compile(
    r"(?P<name>\b(?:proxy-)?authorization(?P<sep>[\"']?\s*[=:]\s*[\"']?)"
    r"(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
    rf"(?P<value>{_NOT_DONE}[^\s\"',;]+)",
    re.I,
)
_BEARER = re.compile(rf"\b(?P<name>bearer|basic)(?P<sep>\s+){_NOT_DONE}[\w.~+/=-]{{8,}}", re.I)
_COOKIE = re.compile(rf"(?P<name>\b(?:set-)?cookie\s*:\s*){_NOT_DONE}[^\"'\n]+", re.I)
# Signed URLs: S3 presigned, Azure SAS, OAuth codes.
_QUERY_SECRET = re.compile(
    rf"(?P<name>[?&](?:sig|signature|x-amz-signature|x-amz-credential|code|key)=){_NOT_DONE}"
    r"[^\s&#\"']+",
    re.I,
)
# `wandb login KEY` and a .netrc line: the value follows a space, not `=`.
_SPACED_SECRET = re.compile(
    rf"(?P<name>\bwandb\s+login(?:\s+--?[\w-]+)*\s+|\bmachine\s+\S+\s+login\s+\S+\s+password\s+)"
    rf"{_NOT_DONE}(?!-)\S+",
    re.I,
)
# Webhook URLs whose path is the secret.
_WEBHOOK = re.compile(
    r"(?P<name>https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)"
    r"|(?:\w+\.)?discord(?:app)?\.com/api/webhooks"
    r"|[\w.-]+\.webhook\.office\.com/webhookb2|outlook\.office\.com/webhook))/[^\s\"'<>]+",
    re.I,
)
_TOKEN_SHAPES = re.compile(
    r"\b(?:"
    r"hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,}"  # GitHub
    r"|sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{20,}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    r"|xox[abposre]-[\w-]{10,}|xapp-\d-[\w-]{10,}"  # Slack
    r"|(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"  # AWS access key ids
    r"|AIza[\w-]{35}"  # Google API keys
    r"|glpat-[\w-]{20,}"  # GitLab
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}"  # Stripe
    r"|npm_[A-Za-z0-9]{36}|pypi-AgE[\w-]{50,}"  # package registries
    r"|local-[0-9a-f]{40}"  # W&B keys of a local server
    r"|eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}"  # JSON web tokens
    r")"
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*)", re.S
)


def _keep_name(match: re.Match[str]) -> str:
    return f"{match['name']}{REDACTED}"


def redact_text(text: str) -> str:
    """`text` with every secret it holds replaced by `<redacted>`; the words around it kept."""
    text = _PRIVATE_KEY.sub(f"-----BEGIN PRIVATE KEY----- {REDACTED}", text)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    text = _WEBHOOK.sub(lambda m: f"{m['name']}/{REDACTED}", text)
    text = _AUTH_HEADER.sub(_keep_name, text)
    text = _COOKIE.sub(_keep_name, text)
    text = _ASSIGNED.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _FLAG_VALUE.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _QUERY_SECRET.sub(_keep_name, text)
    text = _SPACED_SECRET.sub(_keep_name, text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def redact_url(url: str) -> str:
    """A URL hangwatch sends to, fit to show: scheme, host and port only. A webhook's path
    and query are its password, and user:password may precede the host."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return REDACTED
    if not parts.scheme or not host:
        return REDACTED
    host = f"[{host}]" if ":" in host else host
    rest = f"/{REDACTED}" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{port}{rest}"


def redact_env_value(name: str, value: str) -> str:
    if SECRET_NAME.search(name) and not READABLE_NAME.fullmatch(name):
        return REDACTED
    return redact_text(value)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Redact a command line item by item: a secret-named flag hides the item after it, and
    so does `wandb login`, whose key is a bare argument."""
    out: list[str] = []
    hide_next = False
    for item in argv:
        if hide_next and not item.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        named = re.fullmatch(rf"--?[\w-]*{_SECRET_WORD}[\w-]*", item, re.I) is not None
        hide_next = named or (item == "login" and bool(out) and out[-1].endswith("wandb")) \
            or (hide_next and item.startswith("-") and not named and _after_login(out))
        out.append(redact_text(item))
    return out


def _after_login(out: Sequence[str]) -> bool:
    """Still inside `wandb login [--flags] KEY`: the flags before the key keep it hidden."""
    for item in reversed(out):
        if item == "login":
            return True
        if not item.startswith("-"):
            return False
    return False


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
