import datetime as dt

import pytest

from hangwatch.core.timestamps import parse_stamp

BASE = dt.datetime(2026, 1, 11, 10, 0, 0, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize("line, offset", [
    ("2026-01-11T10:00:00Z [ACTOR] init_model START", 0.0),
    ("2026-01-11T12:00:00+02:00 x", 0.0),
    ("2026-01-11 10:00:00,250 INFO x", 0.25),
    ("2026-01-11 10:00:00.5 x", 0.5),
    ("[2026-01-11 10:00:01] x", 1.0),
    ("(TaskRunner pid=12) 2026-01-11 10:00:02 x", 2.0),
    ("I0111 10:00:03.123456 12 main.cc:1] x", 3.123456),
])
def test_common_formats_parse(line, offset):
    assert parse_stamp(line, default_year=2026) == pytest.approx(BASE + offset)


@pytest.mark.parametrize("line", ["step 100 loss 0.5", "2026-13-45 99:00:00 not a date", ""])
def test_lines_without_a_timestamp_give_none(line):
    assert parse_stamp(line) is None
