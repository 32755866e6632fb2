"""`checks:` in rule packs: validated with file:line like the other sections, run by doctor."""

from __future__ import annotations

import pytest

from hangwatch.doctor import packs
from hangwatch.doctor.packs import load_pack_checks
from hangwatch.errors import ConfigErrors
from hangwatch.packs.load import load_pack_text
from tests.fakes.doctor import by_id, context

PACK = """pack: mine
checks:
  - id: hf_token
    env: HF_TOKEN
    fix: export HF_TOKEN from the secret store
  - id: dataset_mounted
    path: $DATA_ROOT/train
    status: warn
"""


def test_pack_checks_run_against_the_environment(tmp_path):
    rules = tmp_path / "mine.yaml"
    rules.write_text(PACK)
    loaded = [c for c in load_pack_checks([rules]) if c.origin.pack == "mine"]
    assert [(c.id, c.kind, c.status) for c in loaded] == [("hf_token", "env", "fail"),
                                                          ("dataset_mounted", "path", "warn")]
    ctx = context({"DATA_ROOT": str(tmp_path)}, options={"pack_checks": tuple(loaded)})
    checks, _ = packs.run(ctx)
    token = by_id(checks, "pack.mine.hf_token")
    assert (token.status, token.fix) == ("fail", "export HF_TOKEN from the secret store")
    assert token.detail == f"HF_TOKEN is not set ({rules}:3)"
    mounted = by_id(checks, "pack.mine.dataset_mounted")
    assert (mounted.status, mounted.detail) == ("warn", f"{tmp_path / 'train'} does not exist "
                                                        f"({rules}:6)")
    (tmp_path / "train").mkdir()
    ctx = context({"DATA_ROOT": str(tmp_path), "HF_TOKEN": "x"},
                  options={"pack_checks": tuple(loaded)})
    assert {c.status for c in packs.run(ctx)[0]} == {"ok"}


@pytest.mark.parametrize(("entry", "error"), [
    ("  - id: both\n    env: A\n    path: /x\n",
     "t.yaml:3: rule both: a check needs one of `env: NAME`"),
    ("  - id: bad_env\n    env: not a name\n",
     "t.yaml:4: rule bad_env: `env` must be a variable name (e.g. HF_TOKEN), not 'not a name'"),
    ("  - id: bad_status\n    env: A\n    status: maybe\n",
     "t.yaml:5: rule bad_status: `status` must be fail or warn, not 'maybe'"),
    ("  - id: typo\n    env: A\n    fixx: y\n",
     "t.yaml:5: rule typo: unknown key 'fixx' in checks"),
])
def test_bad_pack_checks_are_reported_with_file_and_line(entry, error):
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text("pack: t\nchecks:\n" + entry, "t.yaml")
    assert error in str(caught.value)


def test_a_pack_with_checks_still_loads_as_rules():
    assert load_pack_text(PACK, "mine.yaml").name == "mine"
