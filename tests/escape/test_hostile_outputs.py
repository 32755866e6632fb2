"""Log text is hostile: whatever a job prints reaches every output harmless, and its secrets
do not reach any of them."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from hangwatch.commands.check import render as render_check
from hangwatch.commands.snapshot import render as render_snapshot
from hangwatch.core.events import Advice, Incident, Notice, SignalEvent, StallEvent
from hangwatch.escape import markdown
from hangwatch.escape.github import command_data, command_property
from hangwatch.escape.jsontext import dumps
from hangwatch.escape.terminal import visible
from hangwatch.reporters.console import ConsoleReporter
from hangwatch.reporters.github import annotation, summary
from hangwatch.reporters.incident import write_incident
from hangwatch.reporters.jsonl import JsonReporter
from hangwatch.reporters.junit import junit_xml
from hangwatch.reporters.plain import PlainReporter

SECRET = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
HOSTILE = [
    "\x1b]0;owned title\x07",  # OSC: window title
    "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[2J\x1b[H screen cleared",  # CSI
    "\x9b31m C1 CSI",
    "ring\x07 back\x08\x08\x08\x08space",
    "[bold red]markup[/] [link=https://evil.example]link[/link]",
    "\u202eevil bidi override\u202c",
    "::add-mask::x",
    "::stop-commands::resume-token",
    "```",
    "```` ~~~ </code></pre><script>alert(1)</script>",
    "| a | b | <img src=x onerror=alert(1)>",
    "]]> <![CDATA[ & < >",
    "nul\x00 vt\x0b ff\x0c fs\x1c del\x7f",
    "bad bytes \udcff\udc80 lone \ud800 nonchars \ufffe\uffff",
    f"export HF_TOKEN={SECRET}",
]
# What no terminal output may carry: C0 but tab and newline, DEL, C1, bidi controls.
TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def stall() -> StallEvent:
    signals = tuple(SignalEvent("hostile", "error", "job.log", n, line, 0.0,
                                (Advice(f"look at line {n}", f"signal hostile: {line}"),))
                    for n, line in enumerate(HOSTILE, 1))
    return StallEvent("train_loop", "Training loop", "dist_init", 65.0, 60.0, 0.0,
                      advice=tuple(a for s in signals for a in s.advice), signals=signals)


def incident(report: str | None = "/reports/x") -> Incident:
    s = stall()
    return Incident(s, report, s.advice, tuple(HOSTILE))


def outside_code(md: str) -> str:
    """Markdown with its fenced blocks and code spans taken out: what a renderer interprets."""
    kept, fence = [], ""
    for line in md.splitlines():
        opening = re.match(r"`{3,}", line)
        if fence:
            fence = "" if line.rstrip() == fence else fence
        elif opening:
            fence = opening.group()
        else:
            kept.append(line)
    return re.sub(r"(?<![`\\])(`+)(?:(?!\1).)+?\1(?!`)", "", "\n".join(kept))


def assert_no_html(md: str) -> None:
    rest = outside_code(md)
    # `\<` is a literal `<` in Markdown: only an unescaped one starts HTML.
    assert not re.search(r"(?<!\\)<(?:script|img|b>|i>|/code)", rest), rest


def assert_terminal_safe(text: str) -> None:
    assert not TERMINAL_UNSAFE.search(text), repr(TERMINAL_UNSAFE.search(text))
    assert SECRET not in text


def test_plain_output_shows_control_characters_escaped_and_redacts():
    out = io.StringIO()
    reporter = PlainReporter(out, now=lambda: 0.0)
    for event in stall().signals:
        reporter.event(event)
    reporter.notice(Notice("job.log", "replaced", "job.log: " + "".join(HOSTILE)))
    reporter.incident(incident(report=None))  # no report: every piece of advice is shown
    text = out.getvalue()
    assert_terminal_safe(text)
    assert "\\x1b]0;owned title\\x07" in text and "\\u202e" in text
    assert "[bold red]markup[/]" in text
    # Every line is ours (a stamp first): none can be read as a workflow command.
    assert all(re.match(r"\d{4}-\d\d-\d\dT", line) for line in text.splitlines())


def test_live_view_never_reads_log_text_as_markup_or_sends_its_controls():
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, height=60, force_terminal=True)
    reporter = ConsoleReporter(buffer, now=lambda: 0.0, console=console)
    for event in stall().signals:
        reporter.event(event)
    reporter.notice(Notice("job.log", "replaced", "".join(HOSTILE)))
    reporter.incident(incident())
    reporter.close()
    raw = buffer.getvalue()
    # rich draws with CSI sequences of its own; nothing else may reach the terminal.
    ours = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "\x1b" not in ours and "\x07" not in ours and "\x08" not in ours
    assert "\x1b[2J" not in raw and "\x9b" not in raw
    assert SECRET not in raw
    reporter.incident(Incident(stall(), "/r", (Advice("x", "[bold red]markup[/]"),)))
    plain = Console(file=io.StringIO(), width=120, height=60, record=True)
    plain.print(reporter.frame())
    assert "[bold red]markup[/]" in plain.export_text()


def test_check_and_snapshot_print_log_text_escaped():
    out = io.StringIO()
    render_check({"verdict": "stalled", "phase": None, "phase_title": None,
                  "last_completed": None, "quiet_s": 1.0, "threshold_s": 1.0, "lines": {"a": 1},
                  "timeline": [], "marker": HOSTILE[0], "threshold_from": "default",
                  "context": HOSTILE[1], "between": HOSTILE[2],
                  "place": "p", "place_title": HOSTILE[3], "kind": "train_loop",
                  "last_line": {"source": HOSTILE[4], "line": 3, "text": HOSTILE[5]},
                  "waits": [{"template": line, "count": 2, "span_s": 1.0, "why": "identical"}
                            for line in HOSTILE],
                  "ranks": [], "laggards": [], "rank_summary": "", "desync": "",
                  "signals": [{"severity": "error", "id": "x", "count": 1, "source": "a",
                               "line": n, "text": line} for n, line in enumerate(HOSTILE)],
                  "advice": [{"text": "t", "because": line} for line in HOSTILE]}, out)
    assert_terminal_safe(out.getvalue())
    buffer = io.StringIO()
    render_snapshot({"processes": [{"pid": 7, "name": line, "cmdline": ["python", line],
                                    "stack": f"Thread 7\n    {line}"} for line in HOSTILE],
                     "gpus": [], "system": {}},
                    Console(file=buffer, width=200, force_terminal=False, highlight=False))
    text = buffer.getvalue()
    assert_terminal_safe(text)
    assert "[link=https://evil.example]link[/link]" in text


def test_workflow_commands_stay_one_command_whatever_the_text():
    data = command_data("a\nb\r\n::add-mask::x % 100")
    assert "\n" not in data and "\r" not in data
    assert data == "a%0Ab%0D%0A::add-mask::x %25 100"
    assert command_property("Stall: x, y") == "Stall%3A x%2C y"
    line = annotation(incident())
    assert line.startswith("::error title=") and "\n" not in line and "\r" not in line
    assert_terminal_safe(line)


def test_step_summary_keeps_log_text_inside_its_code(tmp_path):
    folder = write_incident(tmp_path, stall=stall(), timeline=[], log_tail=HOSTILE,
                            sources=["job.log"], snapshot=None, advice=stall().advice)
    text = summary(Incident(stall(), str(folder), stall().advice))
    assert_terminal_safe(text)
    assert_no_html(text)
    assert not any(line.lstrip().startswith("::") for line in outside_code(text).splitlines())


def test_report_md_fences_and_tables_hold_hostile_text(tmp_path):
    folder = write_incident(tmp_path, stall=stall(), timeline=[
        {"phase": "p", "title": "| evil <b>", "state": "started", "line": 1,
         "source": "a|b.log", "started_wall": 0.0, "duration_s": 1.0}],
        log_tail=HOSTILE, sources=["job.log"],
        snapshot={"processes": [{"pid": 7, "name": "x|y", "cmdline": ["a|b", "<i>"],
                                 "stack": "```\n# not a heading\n<b>"}], "gpus": [],
                  "system": {}}, advice=stall().advice)
    md = (folder / "report.md").read_text()
    assert_terminal_safe(md)
    assert SECRET not in md
    assert_no_html(md)
    # Every table row has exactly as many cells as its header.
    tables = [line for line in outside_code(md).splitlines() if line.startswith("|")]
    assert tables
    for row in tables:
        assert len(re.findall(r"(?<!\\)\|", row)) in (6, 11), row
    # The log tail's fence is longer than any backtick run inside it, so it closes last.
    tail = md[md.index("## Log tail"):].splitlines()
    fence = tail[2]
    assert fence.startswith("`````") and tail[-1] == fence.removesuffix("text")
    assert tail.count(fence.removesuffix("text")) == 1


def test_junit_parses_after_hostile_input(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes("\n".join(HOSTILE).encode("utf-8", "replace") + b"\xff\xfe\n")
    data = junit_xml(command=["python", "train.py", "--hf-token", SECRET, "]]>\x1b"],
                     incident=incident(), exit_status=3, duration_s=1.0, log_path=log)
    root = ET.fromstring(data)  # a real XML parser: raises on anything XML 1.0 cannot hold
    text = data.decode("utf-8")
    assert SECRET not in text
    out = root.find(".//system-out")
    assert out is not None and "\\x1b]0;owned title\\x07" in (out.text or "")
    assert "]]> <![CDATA[ & < >" in (out.text or "")


def test_json_lines_are_valid_utf8_json_for_any_input():
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    reporter = JsonReporter(out)
    for event in stall().signals:
        reporter.event(event)
    reporter.notice(Notice("bad\udcffname.log", "waiting", "bad\udcffname.log: waiting"))
    reporter.incident(incident())
    lines = raw.getvalue().split(b"\n")[:-1]
    assert len(lines) == len(HOSTILE) + 2
    for line in lines:
        decoded = json.loads(line.decode("utf-8"))  # strict UTF-8, strict JSON
        assert SECRET not in json.dumps(decoded)
        assert not re.search(b"\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]", line)  # C1, bidi raw


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_code_span_cannot_be_closed_by_its_content(text):
    span = markdown.code(text + "``x`")
    ticks = re.match(r"`+", span)
    assert ticks is not None
    inner = span[len(ticks.group()):-len(ticks.group())]
    assert ticks.group() not in inner and span.endswith(ticks.group())


def test_visible_keeps_tabs_and_printable_text():
    assert visible("a\tb é 日本") == "a\tb é 日本"
    assert visible("\x1b[1m") == "\\x1b[1m"
    assert dumps({"k": "\x85\u2028"}) == '{"k": "\\u0085\\u2028"}'


def test_log_tail_and_stacks_files_carry_no_control_sequences(tmp_path):
    folder = write_incident(tmp_path, stall=stall(), timeline=[], log_tail=HOSTILE,
                            sources=["job.log"], snapshot={"processes": [
                                {"pid": 1, "name": "p", "cmdline": [f"--token={SECRET}"],
                                 "stack": "\x1b]0;t\x07"}]}, advice=())
    for name in ("log-tail.txt", "stacks.txt", "report.md"):
        text = Path(folder, name).read_text()
        assert_terminal_safe(text)
    json.loads(Path(folder, "report.json").read_bytes().decode("utf-8"))


def test_sentences_quoting_frames_show_them_as_code_and_hostile_ones_as_text():
    from hangwatch.escape.markdown import quoting

    assert quoting("rank 2 is in `load_batch` (data loading)") == (
        "rank 2 is in `load_batch` (data loading)")
    for line in HOSTILE:
        for text in (f"rank 1 is in `{line}` while ranks 0 wait", f"odd ` {line}"):
            rendered = quoting(text)
            assert_no_html(rendered)
            assert "\x1b" not in rendered and "\n" not in rendered
