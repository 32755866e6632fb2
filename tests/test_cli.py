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
