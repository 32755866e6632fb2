"""The commands the guides show, run on the examples shipped in docs/examples/: `check` on the
example log, `rules lint` and `rules test` with the example pack, `serve` on the example
config."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}


def hangwatch(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hangwatch", *argv], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=120)


def examples(tmp_path: Path) -> Path:
    """The examples in a folder of the test's own, the log last written two hours ago (a
    checkout writes it now)."""
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder)
    past = time.time() - 7200
    os.utime(folder / "train.log", (past, past))
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_rule_pack_guide_shows_the_shipped_pack():
    guide = (ROOT / "docs" / "guides" / "rule-pack.md").read_text()
    pack = (EXAMPLES / "mytrainer.yaml").read_text()
    assert textwrap.indent(pack, "   ") in guide


def test_check_on_the_example_log_names_the_reward_phase_and_exits_3(tmp_path: Path):
    folder = examples(tmp_path)
    result = hangwatch("check", "train.log", "--rules", "mytrainer.yaml", cwd=folder)
    assert result.returncode == 3, result.stderr
    assert "verdict:        STALLED" in result.stdout
    assert "phase open:     Reward scoring [my_reward]" in result.stdout
    assert "threshold 15m00s, stall_after of my_reward in mytrainer" in result.stdout


def test_rules_lint_and_test_on_the_example_pack_as_the_guide_shows(tmp_path: Path):
    folder = examples(tmp_path)
    lint = hangwatch("rules", "lint", "mytrainer.yaml", cwd=folder)
    assert lint.returncode == 0, lint.stderr
    assert lint.stdout.strip() == ("ok: mytrainer.yaml: pack mytrainer (3 phases, 1 signal, "
                                   "1 progress)")
    bare = hangwatch("rules", "test", "train.log", cwd=folder)
    assert bare.returncode == 0, bare.stderr
    assert "summary: 8 lines, 3 hit a rule, 5 plain (plain lines are progress)" in bare.stdout
    shown = hangwatch("rules", "test", "train.log", "--rules", "mytrainer.yaml",
                      "--show", "matched", cwd=folder)
    assert shown.returncode == 0, shown.stderr
    assert "      7 quiet    | 2026-01-11 10:02:35 [reward] 20 requests pending" in shown.stdout
    assert "summary: 8 lines, 7 hit a rule, 1 plain (plain lines are progress)" in shown.stdout
    assert "at the end: phase my_reward, last completed my_rollout" in shown.stdout


def test_serve_check_config_accepts_the_example_config():
    result = hangwatch("serve", "--check-config", str(EXAMPLES / "hangwatch.yaml"), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "watch mytrainer: 1 logs" in result.stdout


def test_serve_on_the_example_config_reports_the_stall_and_serves_healthz(tmp_path: Path):
    folder = examples(tmp_path)
    config = folder / "hangwatch.yaml"
    port = free_port()  # the example's fixed port could be taken on a shared machine
    config.write_text(config.read_text().replace("127.0.0.1:9464", f"127.0.0.1:{port}"))
    proc = subprocess.Popen([sys.executable, "-m", "hangwatch", "serve", "--config",
                             str(config), "--json"],
                            cwd=folder, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        stall = None
        deadline = time.monotonic() + 60
        while stall is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            if event["event"] == "stall":
                stall = event
        assert stall is not None, proc.stderr.read() if proc.poll() is not None else ""
        assert (stall["watch"], stall["phase"], stall["last_completed"]) == (
            "mytrainer", "my_reward", "my_rollout")
        assert Path(stall["report"]).parent == folder / "reports"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            assert answer.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
