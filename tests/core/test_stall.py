from hangwatch.core.stall import StallTimer


def test_timer_fires_once_when_idle_reaches_threshold():
    timer = StallTimer(now=0.0)
    assert not timer.due(9.99, 10)
    assert timer.due(10.0, 10)
    assert not timer.due(50.0, 10)
    assert timer.stalled


def test_progress_ends_the_stall_and_reports_its_length():
    timer = StallTimer(now=0.0)
    assert timer.progress(5.0) is None
    timer.due(15.0, 10)
    assert timer.progress(20.0) == 5.0
    assert not timer.stalled


def test_seconds_left_counts_down_to_the_deadline():
    timer = StallTimer(now=100.0)
    assert timer.seconds_left(104.0, 10) == 6.0
    assert timer.seconds_left(120.0, 10) == 0.0


def test_backdate_only_moves_last_progress_earlier():
    timer = StallTimer(now=100.0)
    timer.backdate(100.0, 30)
    assert timer.last_progress == 70.0
    timer.backdate(100.0, 5)
    assert timer.last_progress == 70.0
