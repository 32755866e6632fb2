"""The README is the front door: short, with the quick start exactly as it was, the three ways
to run it, the exit codes, and links that lead to pages that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICK_START = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/hangwatch demo"
TEST_SUITE = ("python3 -m venv .venv && .venv/bin/pip install '.[test]' && "
              ".venv/bin/python -m pytest")


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_the_quick_start_gives_the_two_commands_as_code_blocks():
    quick = sections(README.read_text())["Quick start"]
    blocks = re.findall(r"```sh\n(.*?)\n```", quick, flags=re.S)
    assert blocks == [QUICK_START, TEST_SUITE]


def test_the_readme_names_the_three_ways_and_every_exit_code():
    parts = sections(README.read_text())
    ways = parts["Three ways to run it"]
    for command in ("hangwatch train.log", "hangwatch run ", "hangwatch serve --config"):
        assert command in ways
    codes = re.findall(r"^\| ([0-9/ ]+|other) \|", parts["Exit codes"], flags=re.M)
    assert [c.strip() for c in codes] == ["0", "1", "2", "3", "130 / 143", "141", "other"]


def test_every_relative_link_in_the_readme_leads_to_a_file():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/guides/slurm.md" in local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing
