"""rendezvous.env on the variables torchrun really gives its workers: one node (where the local
world is the whole world), several nodes, and an elastic node range."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hangwatch.doctor import rendezvous
from hangwatch.doctor.model import Check
from tests.fakes.doctor import by_id, context

FIXTURES = Path(__file__).parent.parent / "fixtures" / "torchrun"
DUMP = """
import json, os, sys
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
env = {k: v for k, v in os.environ.items() if k in names or k.startswith("TORCHELASTIC_")}
with open(os.path.join(sys.argv[1], "rank" + env["RANK"] + ".json"), "w") as f:
    json.dump(env, f)
"""


def env_check(env: dict[str, str]) -> Check:
    checks, _ = rendezvous.run(context(env, timeout=2.0))
    return by_id(checks, "rendezvous.env")


def stored(kind: str) -> list[dict[str, str]]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURES.glob(f"{kind}.rank*.json"))]


def test_single_node_torchrun_env_passes(tmp_path):
    """A real `torchrun --nproc-per-node 2`: LOCAL_WORLD_SIZE == WORLD_SIZE == 2."""
    pytest.importorskip("torch")
    script = tmp_path / "dump.py"
    script.write_text(DUMP)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    str(script), str(tmp_path)],
                   check=True, timeout=120, capture_output=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    envs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for env in envs:
        assert (env["LOCAL_WORLD_SIZE"], env["WORLD_SIZE"]) == ("2", "2")
        check = env_check(env)
        assert check.status == "ok", check.detail
        assert check.detail == f"rank {env['RANK']} of 2"


@pytest.mark.parametrize("kind", ["multi", "elastic"])
def test_multi_node_and_elastic_torchrun_envs_pass(kind):
    envs = stored(kind)
    assert sorted(e["RANK"] for e in envs) == ["0", "1", "2", "3"]
    for env in envs:
        check = env_check(env)
        assert check.status == "ok", (env["RANK"], check.detail)


def test_local_world_above_world_is_a_fail():
    env = {**stored("multi")[0], "LOCAL_WORLD_SIZE": "8"}
    check = env_check(env)
    assert check.status == "fail"
    assert "LOCAL_WORLD_SIZE=8 is above WORLD_SIZE=4" in check.detail


@pytest.mark.parametrize(("change", "message"), [
    ({"GROUP_RANK": "2"}, "GROUP_RANK=2 is at or above GROUP_WORLD_SIZE=2"),
    ({"ROLE_RANK": "4"}, "ROLE_RANK=4 is at or above ROLE_WORLD_SIZE=4"),
    ({"ROLE_WORLD_SIZE": "6"}, "ROLE_WORLD_SIZE=6 is above WORLD_SIZE=4"),
])
def test_torchrun_group_and_role_out_of_range_fail(change, message):
    check = env_check({**stored("elastic")[3], **change})
    assert check.status == "fail"
    assert message in check.detail
