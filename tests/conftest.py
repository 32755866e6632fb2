"""Fixtures shared across the test tree."""

from __future__ import annotations

import os

import pytest

from hangwatch.packs.load import load_rule_set
from hangwatch.session.engines import prefilter_for
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
    # The built-in rules' databases, compiled once here (seconds): a test's first `hangwatch`
    # child then loads them, and no test's time limit pays for a compile under load.
    prefilter = prefilter_for(load_rule_set())
    if prefilter is not None:
        prefilter.warm()
    yield folder
    if old is None:
        del os.environ["HANGWATCH_CACHE_DIR"]
    else:
        os.environ["HANGWATCH_CACHE_DIR"] = old
