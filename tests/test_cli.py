from __future__ import annotations

import io
import subprocess
import sys

from hangwatch import __version__
from hangwatch.cli import _with_default_command, main


def test_bare_log_path_means_watch():
    assert _with_default_command(["train.log", "--stall", "5m"])[0] == "watch"
    assert _with_default_command(["--stall", "5m", "train.log"])[0] == "watch"
    assert _with_default_command(["check", "train.log"])[0] == "check"


def test_help_and_version_exit_zero():
    out = io.StringIO()
    assert main(["--version"], out, io.StringIO()) == 0


def test_bad_duration_is_a_usage_error(capsys):
    assert main(["check", "x.log", "--stall", "soon"]) == 2
    assert "not a duration" in capsys.readouterr().err


def test_help_does_not_import_heavy_modules():
    code = ("import sys; from hangwatch.cli import main; "
            "import contextlib, io; f = io.StringIO()\n"
            "with contextlib.redirect_stdout(f):\n"
            "    main(['--help'])\n"
            "heavy = [m for m in ('rich', 'watchdog', 'psutil', 'regex', 'yaml', 'pynvml') "
            "if m in sys.modules]\n"
            "print(','.join(heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == ""


def test_version_string():
    result = subprocess.run([sys.executable, "-m", "hangwatch", "--version"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"hangwatch {__version__}"


def test_a_mistyped_command_exits_2_with_the_command_meant(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    assert main(["chek", "train.log"], io.StringIO(), err) == 2
    assert "did you mean `check`?" in err.getvalue()
    err = io.StringIO()
    assert main(["snapshto", "--json"], io.StringIO(), err) == 2
    assert "did you mean `snapshot`?" in err.getvalue()


def test_a_word_that_is_an_existing_file_or_looks_like_a_log_is_watched(tmp_path, monkeypatch):
    from hangwatch.cli import mistyped_command

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chek").write_text("")
    assert mistyped_command(["chek"]) is None  # a log of that name is there: watch it
    assert mistyped_command(["watch.log"]) is None  # may not exist yet
    assert mistyped_command(["logs/run"]) is None
    assert mistyped_command(["train"]) is None  # close to nothing
    assert mistyped_command(["rnu"]) == "run"


def _parsers(parser):
    """Every parser and subparser, by its prog name."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_option_of_every_command_has_one_line_of_help():
    from hangwatch.cli import build_parser

    missing = [f"{p.prog} {a.option_strings or a.dest}" for p in _parsers(build_parser())
               for a in p._actions if not a.help]
    assert missing == []


def _options(prog_end: str) -> dict[str, object]:
    from hangwatch.cli import build_parser

    [parser] = [p for p in _parsers(build_parser()) if p.prog.endswith(prog_end)]
    return {o: a for a in parser._actions for o in a.option_strings}


def test_run_does_not_offer_exit_on_stall_and_snapshot_offers_report_dir():
    assert "--exit-on-stall" not in _options(" run")
    assert "--exit-on-stall" in _options(" watch")
    assert "--report-dir" in _options(" snapshot")


def test_options_shared_by_commands_have_the_same_help_and_meaning():
    from hangwatch.cli import build_parser

    seen: dict[str, tuple[str, str]] = {}
    differ = []
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            for option in action.option_strings:
                # Defaults differ by command, and so does what --json writes; --log is the
                # job's log for both run (which writes it) and snapshot (finds its writers).
                if option in ("-h", "--help", "--stall", "--report-dir", "--json", "--log"):
                    continue
                key = (action.help or "", action.dest)
                if seen.setdefault(option, key) != key:
                    differ.append(f"{parser.prog} {option}")
    assert differ == []
