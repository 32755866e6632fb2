"""Fixtures shared across the test tree."""

from __future__ import annotations

import os

import pytest

from tests.fakes.jobs import Jobs


@pytest.fixture
def jobs(tmp_path):
    """Real child processes in known states (blocked, zombie, writing a log); all ended after."""
    jobs = Jobs(tmp_path)
    yield jobs
    jobs.close()


@pytest.fixture(scope="session", autouse=True)
def prefilter_cache(tmp_path_factory):
    """Compiled prefilter databases go to a folder of the run's own, never the user's cache;
    child processes (`hangwatch run`, `check`) inherit the setting."""
    folder = tmp_path_factory.mktemp("prefilter-cache")
    old = os.environ.get("HANGWATCH_CACHE_DIR")
    os.environ["HANGWATCH_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        del os.environ["HANGWATCH_CACHE_DIR"]
    else:
        os.environ["HANGWATCH_CACHE_DIR"] = old
