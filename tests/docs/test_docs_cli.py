"""The command reference (docs/reference/cli.md) is generated from the argument parser and
kept current, and every subcommand and option that `--help` lists is in the documentation."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "reference" / "cli.md"
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}


def gen_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DOCS / "gen_cli.py"), *args], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=60)


def help_of(*command: str) -> str:
    result = subprocess.run([sys.executable, "-m", "hangwatch", *command, "--help"], cwd=ROOT,
                            env=env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def listed_subcommands(help_text: str) -> list[str]:
    """The names `--help` lists under its positional COMMAND or ACTION, one a line, indented
    four spaces (a long name has its help on the next line)."""
    positionals = help_text.split("positional arguments:\n", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", positionals, flags=re.M)
    assert names, help_text
    return names


def every_command() -> list[tuple[str, ...]]:
    commands: list[tuple[str, ...]] = [()]
    for name in listed_subcommands(help_of()):
        commands.append((name,))
        if name == "rules":
            commands += [("rules", action) for action in listed_subcommands(help_of("rules"))]
    return commands


def hand_written_pages() -> str:
    return "\n".join(p.read_text() for p in DOCS.rglob("*.md") if p != CLI_PAGE)


def test_the_generated_command_reference_is_current():
    result = gen_cli("--check")
    assert result.returncode == 0, result.stderr


def test_a_stale_command_reference_fails_the_check(tmp_path: Path):
    stale = tmp_path / "cli.md"
    stale.write_text(CLI_PAGE.read_text().replace("--exit-on-stall", "--exit-when-stalled"))
    result = gen_cli("--check", "--page", str(stale))
    assert result.returncode == 1
    assert "is stale" in result.stderr
    assert gen_cli("--page", str(stale)).returncode == 0  # regenerated, it is current again
    assert gen_cli("--check", "--page", str(stale)).returncode == 0


def test_every_subcommand_and_option_help_lists_is_in_the_reference_and_the_pages():
    reference = CLI_PAGE.read_text()
    pages = hand_written_pages()
    commands = every_command()
    assert ("rules", "test") in commands and ("alert-test",) in commands
    missing = []
    for command in commands:
        name = " ".join(("hangwatch", *command))
        if f"## {name}\n" not in reference:
            missing.append(f"{name}: no section in {CLI_PAGE.name}")
        if command and f"hangwatch {command[-1]}" not in pages and command[-1] not in pages:
            missing.append(f"{name}: not in any hand-written page")
        for option in sorted(set(OPTION.findall(help_of(*command)))):
            if f"`{option}" not in reference and f", {option}" not in reference:
                missing.append(f"{name} {option}: not in {CLI_PAGE.name}")
            if option not in pages:
                missing.append(f"{name} {option}: not in any hand-written page")
    assert not missing, "\n".join(missing)
