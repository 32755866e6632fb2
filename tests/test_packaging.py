"""The built-in rule packs ship inside the wheel, so a non-editable install finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_every_builtin_rule_pack(tmp_path: Path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=120,
    )
    [wheel] = tmp_path.glob("hangwatch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packs = sorted(p.name for p in (ROOT / "rules").glob("*.yaml"))
    assert packs, "no rule packs in rules/"
    for pack in packs:
        assert f"hangwatch/rules/{pack}" in names
    assert "hangwatch/cli.py" in names
