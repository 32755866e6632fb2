"""Where alerts go: a webhook (the payload as JSON), Alertmanager (`/api/v2/alerts`), or a
command (the payload on stdin and as `HANGWATCH_*` variables, never through a shell).

Each `send` is bounded by a timeout and raises `DeliveryError` saying whether a retry can
help. Targets are called from the sender's threads only, never from the watch loop.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from hangwatch import __version__
from hangwatch.alerts.payload import alertmanager_alerts, scalar_env
from hangwatch.escape.redact import redact_argv, redact_text, redact_url

TIMEOUT_S = 5.0
AM_VALID_S = 240.0  # a firing alert's endsAt ahead of now: 4 resend periods, as Prometheus
AM_RESEND_S = 60.0
ERROR_TAIL = 300  # characters of a failing command's stderr kept for the log
TargetKind = Literal["webhook", "alertmanager", "exec"]


class DeliveryError(Exception):
    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass(frozen=True)
class TargetSpec:
    """A target as configured: a URL (webhook, alertmanager) or an argv (exec)."""

    kind: TargetKind
    url: str = ""
    argv: tuple[str, ...] = ()

    @property
    def display(self) -> str:
        """For logs and errors: tokens in URLs and secret arguments hidden."""
        if self.kind == "exec":
            return f"exec {shlex.join(redact_argv(self.argv))}"
        return f"{self.kind} {redact_url(self.url)}"

    @property
    def key(self) -> str:
        """A stable name for this target's spool folder that gives nothing of a token away
        but a short hash."""
        raw = json.dumps([self.kind, self.url, list(self.argv)])
        return f"{self.kind}-{hashlib.sha256(raw.encode()).hexdigest()[:16]}"

    @property
    def label(self) -> str:
        """A bounded, secret-free metric label: the kind and the host (or program name)."""
        if self.kind == "exec":
            return f"exec:{Path(self.argv[0]).name}" if self.argv else "exec"
        return f"{self.kind}:{urlsplit(self.url).hostname or '?'}"


class Target(Protocol):
    spec: TargetSpec

    def send(self, payload: Mapping[str, Any]) -> None: ...


def check_url(url: str) -> str | None:
    """Why `url` cannot be a target, or None when it can."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        return f"not a URL: {exc}"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "the URL has spaces or control characters"
    if parts.scheme not in ("http", "https"):
        return "the URL must start with http:// or https://"
    if not parts.hostname:
        return "the URL has no host"
    return None


def make_target(spec: TargetSpec, *, timeout: float = TIMEOUT_S) -> Target:
    if spec.kind == "webhook":
        return WebhookTarget(spec, timeout)
    if spec.kind == "alertmanager":
        return AlertmanagerTarget(spec, timeout)
    return ExecTarget(spec, timeout)


# --- HTTP ----------------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would turn the POST into a GET and drop the alert: treat it as a failure."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())


def post_json(url: str, body: Any, timeout: float) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(body, ensure_ascii=False).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": f"hangwatch/{__version__}"})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65536)
    except urllib.error.HTTPError as exc:
        # 408 and 429 say "later"; 5xx may pass; any other 4xx would be refused again.
        retry = exc.code >= 500 or exc.code in (408, 429) or exc.code < 400
        raise DeliveryError(f"HTTP {exc.code} {exc.reason}", retry=retry) from None
    except http.client.InvalidURL:  # its message would quote the URL, token and all
        raise DeliveryError("invalid URL", retry=False) from None
    except http.client.HTTPException as exc:  # a connection dropped mid-answer
        raise DeliveryError(f"bad answer: {type(exc).__name__}", retry=True) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryError(redact_text(f"cannot reach: {reason}"), retry=True) from None


class WebhookTarget:
    def __init__(self, spec: TargetSpec, timeout: float) -> None:
        self.spec = spec
        self.timeout = timeout

    def send(self, payload: Mapping[str, Any]) -> None:
        post_json(self.spec.url, payload, self.timeout)


class AlertmanagerTarget:
    """POST to `/api/v2/alerts`. Alertmanager resolves an alert that is not re-sent before
    its `endsAt`, so the episodes firing are posted again every AM_RESEND_S (`resend`)."""

    def __init__(self, spec: TargetSpec, timeout: float) -> None:
        self.spec = spec
        self.timeout = timeout
        base = spec.url.rstrip("/")
        self.url = base if base.endswith("/api/v2/alerts") else f"{base}/api/v2/alerts"
        self._firing: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()

    def send(self, payload: Mapping[str, Any]) -> None:
        post_json(self.url, alertmanager_alerts(payload, now=time.time(), valid_s=AM_VALID_S),
                  self.timeout)
        with self._lock:
            if payload["event"] == "recovered":
                self._firing.pop(str(payload["episode"]), None)
            else:
                self._firing[str(payload["episode"])] = payload

    def keep_firing(self, payload: Mapping[str, Any]) -> None:
        """An episode alerted before a restart: re-sent with the others from now on."""
        with self._lock:
            self._firing[str(payload["episode"])] = payload

    def resend(self) -> None:
        """Keep firing alerts alive; a failure here is retried at the next period."""
        with self._lock:
            firing = list(self._firing.values())
        for payload in firing:
            self.send(payload)


# --- exec ----------------------------------------------------------------------------------


class ExecTarget:
    """Runs the command with the payload as JSON on stdin; log text goes only there and into
    `HANGWATCH_*` variables, never into the arguments. A command still running at the
    timeout is killed with its whole process group."""

    def __init__(self, spec: TargetSpec, timeout: float) -> None:
        self.spec = spec
        self.timeout = timeout

    def send(self, payload: Mapping[str, Any]) -> None:
        env = {**os.environ, **scalar_env(payload)}
        data = json.dumps(payload, ensure_ascii=False).encode()
        with tempfile.TemporaryFile() as errors:
            try:
                proc = subprocess.Popen(list(self.spec.argv), stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=errors, env=env,
                                        start_new_session=True)
            except OSError as exc:
                raise DeliveryError(f"cannot start: {exc.strerror or exc}", retry=True) from None
            try:
                proc.communicate(data, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise DeliveryError(f"still running after {self.timeout:g}s; killed",
                                    retry=True) from None
            if proc.returncode != 0:
                errors.seek(0)
                tail = errors.read().decode("utf-8", "replace").strip()[-ERROR_TAIL:]
                raise DeliveryError(redact_text(f"exit status {proc.returncode}"
                                                + (f": {tail}" if tail else "")), retry=True)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()


def split_command(text: str) -> tuple[str, ...]:
    """`--alert-exec 'CMD ARGS'`: split as a POSIX shell would, run without one."""
    return tuple(shlex.split(text))


def specs_from_flags(webhooks: Sequence[str], alertmanagers: Sequence[str],
                     commands: Sequence[str]) -> list[TargetSpec]:
    """Targets given on the command line; raises ValueError naming the bad flag."""
    specs: list[TargetSpec] = []
    for kind, urls in (("webhook", webhooks), ("alertmanager", alertmanagers)):
        for url in urls:
            problem = check_url(url)
            if problem:
                raise ValueError(f"--{kind} {redact_url(url)}: {problem}")
            specs.append(TargetSpec(kind, url=url))  # type: ignore[arg-type]
    for text in commands:
        try:
            argv = split_command(text)
        except ValueError as exc:
            raise ValueError(f"--alert-exec: {exc}") from None
        if not argv:
            raise ValueError("--alert-exec: empty command")
        specs.append(TargetSpec("exec", argv=argv))
    return specs
