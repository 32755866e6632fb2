"""hangwatch on real hang logs from public issue threads (tests/corpus/): the index is sound,
accuracy does not fall below what was measured, and no healthy excerpt is called stalled."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import regex
import yaml

from hangwatch.commands.check import read_log
from hangwatch.session.engines import build_engine
from tests.corpus.harness import (
    STALL_S,
    Entry,
    Tally,
    builtin_packs,
    engine_for,
    extenders,
    judge,
    load_index,
    measure,
    percent,
    problems,
    raw_index,
    rule_set,
    without_alternatives,
    without_framework,
    written_for,
)

REPO = Path(__file__).resolve().parent.parent
# One worker measures the corpus once (`tallies`) for every test here.
pytestmark = pytest.mark.xdist_group("corpus")

# Measured on this branch, rounded down to the percent. Raise them when the figures rise.
# Round 3 added 20 held-out hangs, half of them not named at first sight (90 % -> 87 % packs
# on over 164 hangs; no earlier excerpt changed its packs-on answer). Left out is 80 % since
# written_for records the alternatives written for a framework rather than whole generic
# phases (it was 77 % with tensorflow's or megatron's whole phase dropped).
# Round 4 added 27 held-out hangs, 12 of them named at first sight: 82 % packs on and 75 %
# left out over 191 hangs, no earlier excerpt changing its answer. After its rules (each
# recorded in written_for.yaml) and the bare-bar readings: 88 % packs on, 77 % left out.
# Round 5 added 14 held-out hangs, kept unread until then, 8 named at first sight: 86.8 % packs
# on and 76.6 % left out over 205 hangs. After its rules: 88 % and 77 %.
# Announcements and bracket bars at the silence (no rule): 83 % left out over 205 hangs.
# Round 6 added 20 held-out hangs, 15 named at first sight; after the code it led to (a
# counter's words, a finished action, the loop resuming after a save) and one vLLM word:
# 88 % packs on, 83 % left out over 225 hangs.
# Round 7 added 25 held-out hangs, 14 named at first sight (18 by today's harness, which
# counts a pack's NCCL watchdog signal as the generic timeout its line is, and a pack's phase
# as its kind of place): 88 % packs on, 83 % left out over 250 hangs. After the code it led
# to (a diverged loss is a metrics line, weight files are a model load, Python's line heads
# behind a launcher's rank prefix) and vLLM's NCCL communicator step: 90 % and 84.8 %.
# Round 8 added 25 held-out hangs, 19 named at first sight; after mmcv's test bar and
# torchrun's banner: 90.2 % packs on, 84.4 % left out over 275 hangs.
# Round 9 added 30 held-out hangs, 22 named at first sight; after its words (each recorded in
# written_for.yaml), box-glyph bars and a training script's own frame: 90.2 % packs on,
# 83.6 % left out over 305 hangs.
# Round 10 added 30 held-out hangs, 20 named at first sight; after its words (recorded), the
# waited-for thing naming a wait, frameworks' loops and headless py-spy frames in printed
# stacks: 89.6 % packs on, 83.0 % left out over 335 hangs.
# Round 11 added 18 held-out hangs, 16 named at first sight, and no rule after them: 89.5 %
# packs on, 83.0 % left out over 353 hangs.
# Round 12 added 20 held-out hangs (13 named at first sight) and round 13 14 (9); after their
# words (recorded) and a finished job's shutdown between: 90.7 % packs on, 81.9 % left out
# over 387 hangs (the rules they led to are left out with their frameworks).
# Rounds 16 and 17 added 15 held-out hangs (11 named at first sight) and 14 (8); after
# their lessons (recorded): 90.9 % packs on, 80.5 % left out over 416 hangs.
# Rounds 18 and 19 added 9 held-out hangs (5 named at first sight) and 6 (3); after their
# lessons (recorded): 90.7 % packs on, 79.6 % left out over 431 hangs.
# Rounds 20 and 21 added 19 held-out hangs (17 named at first sight) and 4 (2); after their
# lessons (recorded): 91.0 % packs on, 79.5 % left out over 454 hangs.
# Rounds 22 to 27 added 7 held-out hangs (5 named at first sight), 16 (8), 16 (11), 12 (9),
# 4 (2) and 19 (15); after their lessons (recorded): 90.0 % packs on, 77.8 % left out over
# 528 hangs.
# Rounds 28 to 30 added 18 held-out hangs (12 named at first sight), 9 (6) and 16 (11); after
# their lessons (recorded): 90.0 % packs on, 77.1 % left out over 571 hangs.
# Rounds 31 to 40 added 98 held-out hangs (63 named at first sight: RL post-training stacks,
# servers, clusters), most from frameworks with no pack; after their lessons (recorded):
# 90.6 % packs on, 76.1 % left out over 669 hangs. Rounds 41 and 42 added 30 (25 named at
# first sight): 90.7 % and 76.4 % over 699 hangs.
# Rounds 43 to 57 added 126 held-out hangs (75 named at first sight: JAX and TensorFlow, data
# pipelines, pretraining stacks, Ray, Trainer/Accelerate, engines in RL, DeepSpeed, launchers,
# late hangs, the Chinese-speaking community, speech, other domains, other accelerators),
# nearly all from frameworks with no pack, whose lessons are left out with them; after those
# lessons (recorded): 89.8 % packs on, 73.9 % left out over 825 hangs. The harness then kept
# only the last of a rule's records made in two rounds for one framework (tensorrt-llm's MPI
# words of round 13 were overwritten by round 35's): leaving a framework out kept rules
# written for it, and 10 hangs counted right by them. Read right, left out is 73.0 %.
# Rounds 58 to 63 added 59 held-out hangs (40 named at first sight: Megatron, multimodal,
# engines starting, timeouts, loading and resuming, faults below the framework); after their
# lessons (recorded): 89.3 % packs on, 72.3 % left out over 884 hangs.
# Rounds 64 to 70 added 105 held-out hangs (75 named at first sight: RL pipelines, torch
# distributed, JAX/TF/TPU, serving engines, trainers, clusters and launchers, jobs outside
# language models), 62 of them from frameworks with no pack; after their lessons (recorded):
# 89.4 % packs on, 71.2 % left out over 989 hangs. Rounds 71 to 77 added 39 (24 named at
# first sight: evaluation and checkpoints, Ray's libraries, data pipelines, other
# accelerators); after their lessons (recorded): 88.6 % packs on, 70.6 % left out over 1,028.
PACKS_ON_FLOOR = 88.5
LEAVE_ONE_OUT_FLOOR = 70.5


@functools.cache
def tallies() -> dict[str, Tally]:
    return measure(load_index())


def healthy_entries() -> list[Entry]:
    return [e for e in load_index() if e.healthy]


def valid_entry(**changes: Any) -> dict[str, Any]:
    raw = dict(raw_index()[0])
    raw.update(changes)
    return raw


# --- the index ---------------------------------------------------------------------------


def test_every_index_entry_names_an_excerpt_a_source_a_known_pack_and_known_ids():
    found = [p for raw in raw_index() for p in problems(raw)]
    assert not found, "\n".join(found)


def test_each_excerpt_is_listed_once():
    files = [raw["file"] for raw in raw_index()]
    assert len(files) == len(set(files))


@pytest.mark.parametrize(("change", "message"), [
    ({"file": "vllm/no-such-excerpt.log"}, "no such excerpt"),
    ({"source": "github.com/org/repo/issues/1"}, "source must be"),
    ({"pack": "no-such-pack"}, "unknown pack"),
    ({"expect": {"phases": ["no_such_phase"], "signals": []}}, "unknown phase"),
    ({"expect": {"phases": [], "signals": ["generic:no_such_signal"]}}, "unknown signal"),
    ({"expect": {"phases": [], "signals": []}}, "expects no phase and no signal"),
    ({"expect": "stalled"}, "expect is `healthy` or a mapping"),
    ({"first_sight": "maybe"}, "first_sight is `right` or `wrong`"),
])
def test_a_malformed_entry_is_reported(change: dict[str, Any], message: str):
    assert any(message in p for p in problems(valid_entry(**change)))


def test_the_corpus_is_broad():
    entries = load_index()
    hangs = [e for e in entries if not e.healthy]
    packed = {e.framework for e in hangs if e.pack}
    assert len(hangs) >= 110
    assert len(healthy_entries()) >= 20
    assert len(packed) >= 8, sorted(packed)
    assert sum(1 for e in hangs if e.pack is None) >= 30


# --- leaving a pack out ------------------------------------------------------------------


def test_leaving_a_pack_out_drops_every_pack_that_extends_it_and_nothing_else():
    packs = builtin_packs()
    dropped = extenders("torch-distributed", packs)
    assert {"torch-distributed", "vllm", "sglang", "lightning", "deepspeed", "megatron",
            "verl-gkd"} <= dropped
    assert not {"python", "ray", "hf-datasets", "jax-distributed"} & dropped
    kept = {p.name for p in rule_set("torch-distributed").packs}
    assert kept == {p.name for p in packs} - dropped


def test_leaving_a_framework_out_drops_the_rules_recorded_as_written_for_it():
    record = written_for()["trl"]
    kept = without_framework("trl", None)
    assert not {s.id for s in kept.signals} & set(record["vllm"])
    assert {s.id for s in rule_set().signals} >= set(record["vllm"])
    assert {p.name for p in kept.packs} == {p.name for p in builtin_packs()}


def test_leaving_a_framework_out_drops_the_stack_rules_recorded_as_written_for_it():
    assert "process_exit" in written_for()["ray"]["generic"]
    kept = {s.id for s in without_framework("ray", "ray").stack_rules}
    assert "process_exit" not in kept and "torch_store" in kept
    assert "process_exit" in {s.id for s in rule_set().stack_rules}


def test_leaving_a_framework_out_drops_only_the_alternatives_written_for_it():
    alternatives = written_for()["tensorflow"]["generic"]["generic:train_loop"]
    kept = without_framework("tensorflow", None).phase("generic:train_loop")
    whole = rule_set().phase("generic:train_loop")
    assert kept is not None and whole is not None and alternatives
    assert all(f"(?:{a})" in whole.start and f"(?:{a})" not in kept.start for a in alternatives)
    assert len(kept.start) < len(whole.start)
    batch = "batch_all_reduce: 1 all-reduces with algorithm = nccl, num_packs = 1"
    assert regex.search(whole.start, batch) and not regex.search(kept.start, batch)
    assert regex.search(kept.start, "Epoch 3/10")  # the rest of the rule stays


def test_leaving_a_framework_out_drops_an_alternative_of_a_phases_done_too():
    # torch 2.2's torchrun banner end was written after reading speechbrain's excerpt
    banner = "torch.distributed.run: [WARNING] *****************************************"
    whole = rule_set().phase("torchrun_launch")
    kept = without_framework("speechbrain", None).phase("torchrun_launch")
    assert whole is not None and kept is not None and whole.done and kept.done
    assert regex.search(whole.done, banner) and not regex.search(kept.done, banner)
    assert kept.start == whole.start


def test_a_rules_alternatives_recorded_in_two_rounds_are_all_left_out():
    # tensorrt-llm's MPI words, recorded in round 13 and again in round 35
    alternatives = written_for()["tensorrt-llm"]["generic"]["generic:distributed_init"]
    assert "\\bfor the device that Open MPI\\b" in alternatives
    assert "\\bMPI size: \\d+, MPI local size: \\d+" in alternatives
    kept = without_framework("tensorrt-llm", None).phase("generic:distributed_init")
    assert kept is not None
    for line in ("WARNING: No preset parameters were found for the device that Open MPI",
                 "[TensorRT-LLM][INFO] MPI size: 4, MPI local size: 4, rank: 0"):
        assert not regex.search(kept.start, line)


def test_a_recorded_alternative_the_pattern_no_longer_holds_is_an_error():
    assert without_alternatives("(?:a)|(?:b)|(?:c)", ("b",)) == "(?:a)|(?:c)"
    assert without_alternatives("(?:a)|(?:b)", ("a", "b")) is None
    assert without_alternatives("a|b", ("a|b",)) is None  # a pattern written alone
    with pytest.raises(ValueError, match="no alternative"):
        without_alternatives("(?:a)|(?:b)", ("a|b",))
    with pytest.raises(ValueError, match="no alternative"):
        without_alternatives("a|b", ("a",))


def test_a_batch_kept_outside_the_repository_is_measured_in_the_same_format(tmp_path):
    hang, healthy = next(e for e in load_index() if not e.healthy and e.pack is None), \
        next(e for e in load_index() if e.healthy)
    for entry in (hang, healthy):
        (tmp_path / entry.file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / entry.file).write_bytes(entry.path.read_bytes())
    raws = [r for r in raw_index() if r["file"] in (hang.file, healthy.file)]
    index = tmp_path / "index.yaml"
    index.write_text(yaml.safe_dump(raws))
    bench = [sys.executable, str(REPO / "bench" / "corpus.py"), "--index", str(index)]
    done = subprocess.run([*bench, "--json"], capture_output=True, text=True, timeout=120)
    figures = json.loads(done.stdout)["all"]
    assert (figures["n"], figures["healthy"]) == (1, 1)
    assert figures["packs_on"] == int(judge(hang, rule_set()).right)
    shown = subprocess.run([*bench, "--totals"], capture_output=True, text=True, timeout=120)
    assert "| **all** | 1 |" in shown.stdout and "wrong (" not in shown.stdout
    index.write_text(yaml.safe_dump([{**raws[0], "file": "missing.log"}]))
    bad = subprocess.run(bench, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and f"{index}: missing.log: no such excerpt" in bad.stderr


def test_every_recorded_rule_exists():
    ids = {(r.origin.pack, r.id) for r in [*rule_set().phases, *rule_set().signals]}
    ids |= {(p.name, s.id) for p in rule_set().packs for s in p.stack_rules}
    for framework, by_pack in written_for().items():
        for pack, rules in by_pack.items():
            assert {(pack, r) for r in rules} <= ids, framework


def test_the_harness_reads_an_excerpt_as_the_check_command_does():
    for entry in load_index()[::10]:
        ours = engine_for(rule_set())
        checks = build_engine(rule_set(), STALL_S)
        read_log(ours, entry.path)
        read_log(checks, entry.path)
        assert _comparable(ours.state()) == _comparable(checks.state()), entry.file


def _comparable(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items()
            if k not in ("idle_s", "phase_since_wall", "timeline", "ranks")}  # times differ


def test_an_excerpt_that_its_own_pack_explains_is_wrong_without_that_pack():
    entry = next(e for e in load_index()
                 if e.file == "verl/evol-rl-hangs-after-test-gen-batch.log")
    assert judge(entry, rule_set()).right
    assert not judge(entry, rule_set("verl-gkd")).right


# --- accuracy ------------------------------------------------------------------------------


def test_accuracy_with_every_pack_stays_above_the_measured_floor():
    total = tallies()["all"]
    assert percent(total.packs_on, total.n) >= PACKS_ON_FLOOR, _wrong("packs on")


def test_accuracy_with_the_frameworks_own_pack_left_out_stays_above_the_measured_floor():
    total = tallies()["all"]
    assert percent(total.leave_one_out, total.n) >= LEAVE_ONE_OUT_FLOOR, _wrong("left out")


@pytest.mark.parametrize("entry", healthy_entries(), ids=lambda e: e.file)
def test_no_healthy_excerpt_is_called_stalled(entry: Entry):
    # judged alone, as the tally judges it: the whole corpus's tally is made once per test
    # worker, and this test need not wait for it on the other one
    outcome = judge(entry, rule_set())
    assert outcome.right, outcome.reported()


def _wrong(label: str) -> str:
    return "\n".join(f"{o.entry.file}: {o.reported()}"
                     for run, o in tallies()["all"].wrong if run == label)
