"""Fixtures shared across the test tree."""

from __future__ import annotations

import pytest

from tests.fakes.jobs import Jobs


@pytest.fixture
def jobs(tmp_path):
    """Real child processes in known states (blocked, zombie, writing a log); all ended after."""
    jobs = Jobs(tmp_path)
    yield jobs
    jobs.close()
