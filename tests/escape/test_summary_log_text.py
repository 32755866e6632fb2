"""The GitHub step summary keeps every piece of log text inside code spans or code blocks,
whichever field of the stall carries it: read back with a CommonMark parser (tables on, as
GitHub has them), no log text may be in prose, a heading, a table cell's text, a link or
HTML."""

from __future__ import annotations

from collections.abc import Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

from hangwatch.core.events import (
    Advice,
    Incident,
    Laggard,
    RankRow,
    SignalEvent,
    StallEvent,
    Wait,
)
from hangwatch.reporters.github import summary
from hangwatch.reporters.incident import write_incident

# What a job may print: Markdown, HTML, table pipes, backtick runs, a heading, a workflow
# command. `LOGn` names the field a leak came from.
PAYLOAD = ("**LOG{n}** _em_ [link](https://evil.example) <img src=x onerror=alert(1)> | cell "
           "`` ` ``` ~~~ # heading \\* &amp; ::error::x")
CODE_TOKENS = {"code_inline", "fence", "code_block"}


def log(n: int) -> str:
    return PAYLOAD.format(n=n)


def hostile_stall() -> StallEvent:
    signal = SignalEvent("nccl_timeout", "error", "job.log", 7, log(1), 0.0,
                         (Advice("Find the rank that is late.", f"signal at job.log:7: {log(2)}"),),
                         context=f"during Training loop; collective {log(3)}")
    laggard = Laggard("logs/r.log", log(4), "train_loop", 12.0, 5, f"quiet: {log(5)}")
    rows = (RankRow(log(4), "logs/r.log", "train_loop", 5, 12.0, log(6), True),
            RankRow(0, "logs/a.log", "train_loop", 6, 1.0, log(7)),
            RankRow(1, "logs/b.log", "train_loop", 6, 1.0, log(7)))
    return StallEvent(
        "train_loop", "Training loop", "dist_init", 65.0, 60.0, 0.0,
        advice=(*signal.advice, Advice("Look at the stacks.", f"stack=x ({log(8)})")),
        signals=(signal,), waits=(Wait(log(9), "time only", 40, 30.0, log(10)),),
        marker=f"job.log:3: {log(11)}", laggards=(laggard,), ranks=rows,
        rank_summary=f"held up by rank x: {log(12)}", desync=f"ranks wait in {log(13)}",
        context=f"named by the line before the stop: a progress line, 1 line(s) before: "
                f"{log(15)}")


def walk(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        yield from walk(token.children or [])


def leaks(markdown_text: str) -> list[str]:
    """(token type, content) of every token outside code that holds log text."""
    parser = MarkdownIt("commonmark").enable("table")
    found = []
    for token in walk(parser.parse(markdown_text)):
        if token.type in CODE_TOKENS or token.children:
            continue
        text = token.content + " ".join(str(v) for v in token.attrs.values())
        if "LOG" in text:
            found.append(f"{token.type}: {text}")
    return found


def test_every_piece_of_log_text_in_the_summary_is_code(tmp_path):
    stall = hostile_stall()
    folder = write_incident(tmp_path, stall=stall, timeline=[], log_tail=[log(14)],
                            sources=["job.log"], snapshot=None, advice=stall.advice)
    text = summary(Incident(stall, str(folder), stall.advice))
    seen = {n for n in range(1, 16) if f"LOG{n}" in text}
    # Every field that reaches the summary is there (the wait's last line and a rank's last
    # line are not shown), and none of them outside code.
    assert seen == set(range(1, 16)) - {6, 7, 10}
    assert leaks(text) == []


def test_summary_without_a_report_keeps_the_evidence_in_code():
    stall = hostile_stall()
    text = summary(Incident(stall, None, stall.advice))
    assert "LOG2" in text and "LOG8" in text
    assert leaks(text) == []
