"""`mkdocs build --strict` builds the site cleanly, and fails on a page left out of the
navigation and on a broken link, as mkdocs.yml's `validation:` asks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mkdocs_or_skip() -> None:
    """The docs extra installs mkdocs; a run without it skips, and never in CI."""
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is missing in CI: pip install '.[docs]'")
        pytest.skip("mkdocs and mkdocs-material are not installed (pip install '.[docs]')")


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(site)], cwd=project, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project)
    shutil.copytree(ROOT / "docs", project / "docs")
    return project


def test_the_site_builds_strict_without_a_warning(tmp_path: Path):
    mkdocs_or_skip()
    result = build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
    assert not (ROOT / "site").exists()


def test_strict_fails_on_a_page_left_out_of_the_nav_and_on_a_broken_anchor(tmp_path: Path):
    mkdocs_or_skip()
    project = copy_project(tmp_path)
    (project / "docs" / "orphan.md").write_text("# Not in the nav\n")
    with (project / "docs" / "guides" / "terminal.md").open("a") as page:
        page.write("\n[gone](../reference/exit-codes.md#no-such-heading)\n")
    result = build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "orphan.md" in result.stderr
    assert "no-such-heading" in result.stderr
