import pytest

from hangwatch.core.durations import format_duration, parse_duration


@pytest.mark.parametrize("text, seconds", [
    ("90", 90), ("90s", 90), ("10m", 600), ("1h", 3600), ("1h30m", 5400), ("1.5m", 90),
    (45, 45), ("250ms", 0.25),
])
def test_parse_duration_accepts_user_forms(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "10x", "-5", "0", "5 m m", True])
def test_parse_duration_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration_is_short():
    assert [format_duration(s) for s in (5, 65, 3725)] == ["5s", "1m05s", "1h02m"]
