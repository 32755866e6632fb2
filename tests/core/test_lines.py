from __future__ import annotations

import random
import tracemalloc

import pytest

from hangwatch.core.lines import CR_PROBES, CUT_MARKER, MAX_LINE, LineSplitter


def split_all(chunks: list[bytes], max_line: int = MAX_LINE) -> bytes:
    s = LineSplitter(max_line)
    return b"".join(s.push(c) for c in chunks)


def test_complete_lines_pass_through_unchanged():
    assert LineSplitter().push(b"a\nbb\n\nccc\n") == b"a\nbb\n\nccc\n"


def test_partial_last_line_is_held_until_its_end_arrives():
    s = LineSplitter()
    assert s.push(b"one\ntw") == b"one\n"
    assert s.pending == 2
    assert s.push(b"o and") == b""
    assert s.push(b" more\nthr") == b"two and more\n"
    assert s.pending == 3


def test_flush_gives_the_held_partial_line_once():
    s = LineSplitter()
    s.push(b"done\nhalf")
    assert s.flush() == b"half\n"
    assert s.flush() == b""
    assert s.pending == 0


def test_crlf_and_lone_cr_each_end_one_line():
    assert LineSplitter().push(b"a\r\nb\rc\n") == b"a\nb\nc\n"


@pytest.mark.parametrize("lone", [CR_PROBES - 1, CR_PROBES, CR_PROBES + 1])
def test_crlf_after_many_progress_redraws_is_still_one_line_end(lone):
    # The \r are probed one by one up to CR_PROBES, then the block is searched: both ways
    # must find the \r\n at the end.
    data = b"bar\r" * lone + b"done\r\n"
    assert LineSplitter().push(data) == b"bar\n" * lone + b"done\n"


def test_crlf_split_across_reads_is_one_line_end():
    s = LineSplitter()
    assert s.push(b"a\r") == b"a\n"
    assert s.push(b"\nb\n") == b"b\n"


def test_two_carriage_returns_before_a_newline_end_two_lines():
    # "x\r" then "\r\n": a bare \r and a \r\n, as a progress bar followed by a newline writes.
    assert split_all([b"x\r\r", b"\n"]) == b"x\n\n"
    assert split_all([b"x\r\r\n"]) == b"x\n\n"


def test_empty_push_keeps_a_pending_carriage_return():
    assert split_all([b"a\r", b"", b"\n", b"b\n"]) == b"a\nb\n"


def test_newline_after_a_swallowed_crlf_half_is_a_new_line():
    # "\r" "\n" "\n": the first \n completes \r\n, the second is an empty line of its own.
    assert split_all([b"a\r", b"\n", b"\n"]) == b"a\n\n"


def test_tqdm_redraws_become_separate_lines():
    bar = b"\r  0%|          | 0/3\r 33%|###       | 1/3\r100%|##########| 3/3\n"
    assert split_all([bar]).split(b"\n") == [
        b"",
        b"  0%|          | 0/3",
        b" 33%|###       | 1/3",
        b"100%|##########| 3/3",
        b"",
    ]


def test_invalid_utf8_and_nul_bytes_are_untouched():
    data = b"\xff\xfe bad \x00 nul \xc3\x28\n"
    assert split_all([data[:5], data[5:]]) == data


def test_line_longer_than_limit_is_cut_with_marker():
    out = split_all([b"x" * 40 + b"\nok\n"], max_line=16)
    assert out == b"x" * 16 + CUT_MARKER + b"\nok\n"


def test_long_line_arriving_in_pieces_is_cut_once_and_keeps_following_lines():
    s = LineSplitter(16)
    out = b"".join(s.push(b"y" * 7) for _ in range(10))
    assert out == b""
    assert s.pending == 16
    assert s.push(b"yy\nnext\n") == b"y" * 16 + CUT_MARKER + b"\nnext\n"


def test_line_of_exactly_the_limit_is_not_cut():
    assert split_all([b"z" * 8, b"z" * 8, b"\n"], max_line=16) == b"z" * 16 + b"\n"


def test_flush_of_a_cut_line_carries_the_marker():
    s = LineSplitter(4)
    s.push(b"abcdefgh")
    assert s.flush() == b"abcd" + CUT_MARKER + b"\n"


@pytest.mark.parametrize("seed", range(20))
def test_any_chunking_gives_the_same_lines(seed: int):
    rng = random.Random(seed)
    alphabet = [b"a", b"b", b"\n", b"\r", b"\r\n", b"\x00", b"\xff", b"c" * 30]
    data = b"".join(rng.choice(alphabet) for _ in range(300))
    cuts = sorted(rng.sample(range(1, len(data)), k=min(40, len(data) - 1)))
    chunks = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    whole = LineSplitter(20)
    pieces = LineSplitter(20)
    expected = whole.push(data) + whole.flush()
    assert b"".join(pieces.push(c) for c in chunks) + pieces.flush() == expected


def test_memory_stays_bounded_on_a_3_mib_line():
    s = LineSplitter()
    chunk = b"m" * (64 << 10)
    tracemalloc.start()
    try:
        for _ in range(48):  # 3 MiB, no newline yet
            assert s.push(chunk) == b""
        out = s.push(b"\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out == b"m" * MAX_LINE + CUT_MARKER + b"\n"
    assert peak < MAX_LINE * 2.5  # the held first MiB and one copy of it, not 3 MiB
