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


def test_stamps_read_by_day_give_the_float_of_a_datetime_built_for_each():
    """The day's start is kept and the time of day added: the same float, to the bit, as
    datetime(...).timestamp(), for every format, zone and fraction, and the same refusals
    (hour 24, second 60, 30 February)."""
    import random

    rng = random.Random(7)
    for _ in range(3000):
        y, mo, d = rng.choice((1999, 2026, 2038)), rng.randint(1, 13), rng.randint(1, 31)
        h, mi, s = rng.randint(0, 24), rng.randint(0, 60), rng.randint(0, 60)
        frac = rng.choice(("", ".5", ",123", ".123456789", ".000001"))
        zone = rng.choice(("", "Z", "+02:00", "-0530", "+14:00", "-25:00"))
        line = f"(pid=1) {y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{frac}{zone} x"
        try:
            tz = (dt.timezone.utc if zone in ("", "Z") else dt.timezone(
                (-1 if zone[0] == "-" else 1) * dt.timedelta(
                    hours=int(zone[1:3]), minutes=int(zone[-2:]))))
            micro = int((frac[1:] or "0")[:6].ljust(6, "0"))
            expected: float | None = dt.datetime(y, mo, d, h, mi, s, micro, tz).timestamp()
        except ValueError:
            expected = None
        assert parse_stamp(line) == expected, line


def test_stamps_of_a_minute_already_read_give_the_same_as_the_first_time():
    """Each minute's start is kept: a stamp read from it gets its seconds and fraction
    added, and a second that is none is still refused there."""
    first = parse_stamp("2026-01-11 10:00:07 x")
    assert parse_stamp("(pid=1) 2026-01-11 10:00:59.5 y") == pytest.approx(BASE + 59.5)
    assert parse_stamp("2026-01-11 10:00:60 y") is None
    assert parse_stamp("2026-01-11 10:00:07 x") == first == BASE + 7
    assert parse_stamp("2026-01-11 24:00:07 x") is None
    assert parse_stamp("2026-01-11 24:00:08 x") is None
