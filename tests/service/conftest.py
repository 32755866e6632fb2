"""What the serve tests share: real `serve` processes, each killed at the end of its test."""

from __future__ import annotations

import pytest

from tests.service.serving import Serve


@pytest.fixture
def serving():
    started: list[Serve] = []

    def start(*args, **kwargs) -> Serve:
        serve = Serve(*args, **kwargs)
        started.append(serve)
        return serve

    yield start
    for serve in started:
        if serve.proc.poll() is None:
            serve.kill()
