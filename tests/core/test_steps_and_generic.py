"""Steps inside phases, the generic layer under the packs, and thresholds that say where
they come from."""

from __future__ import annotations

import pytest
import regex

from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.events import PhaseEvent, StallEvent
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigErrors
from hangwatch.packs.load import load_pack_text, load_rule_set

PACK = r"""
pack: t
phases:
  - id: rollout_init
    start: 'ROLLOUT init START'
    done: 'ROLLOUT init DONE'
  - id: weight_sync
    title: Weight sync
    start: '\[SYNC\] Starting'
    done: '\[SYNC\] completed'
    stall_after: 20m
    advice: ["sync advice"]
  - id: sync_actor
    title: Actor side
    parent: weight_sync
    start: '\[SYNC\] Syncing actor'
    done: 'Actor sync done'
  - id: sync_wait
    title: Waiting for rollout weights
    parent: weight_sync
    start: '\[SYNC\] Waiting for rollout weights'
    advice: ["the rollout side never joined"]
  - id: loop
    start: 'step \d+ loss'
"""

GENERIC = r"""
pack: words
layer: generic
phases:
  - id: checkpoint_save
    title: Saving a checkpoint
    start: '(?i)\bsaving checkpoint'
    advice: ["check the disk"]
  - id: evaluation
    start: '(?i)\bevaluating\b'
    advice: ["eval"]
  - id: train_loop
    start: '(?i)\bprocessing batch \d+'
    nests: false
    advice: ["loop"]
signals:
  - id: timeout
    match: '(?i)timed out'
    advice: ["find the peer"]
"""


def engine(stall: float = 600.0, **kwargs) -> tuple[Engine, FakeClock]:
    clock = FakeClock()
    rules = RuleSet([load_pack_text(GENERIC, "g.yaml"), load_pack_text(PACK, "t.yaml")])
    return Engine(rules, default_stall=stall, clock=clock, **kwargs), clock


def feed(e: Engine, *lines: str) -> list:
    events = []
    for line in lines:
        events += e.feed_line("log", line)
    return events


SYNC = ["ROLLOUT init START", "ROLLOUT init DONE", "[SYNC] Starting weight synchronization",
        "[SYNC] Syncing actor weights...", "[SYNC] ✓ Actor sync done in 0.3s",
        "[SYNC] Waiting for rollout weights (timeout=30s)..."]


def test_a_step_marker_inside_a_phase_leaves_the_phase_open():
    e, clock = engine()
    feed(e, *SYNC)
    state = e.state()
    assert (state["phase"], state["step"], state["last_step"], state["last_completed"]) == (
        "weight_sync", "sync_wait", "sync_actor", "rollout_init")
    clock.advance(20 * 60)
    [stall] = e.tick()
    assert (stall.phase, stall.step, stall.last_step, stall.last_completed) == (
        "weight_sync", "sync_wait", "sync_actor", "rollout_init")
    assert stall.advice[0].text == "the rollout side never joined"
    assert stall.marker == "log:6: [SYNC] Waiting for rollout weights (timeout=30s)..."


def test_steps_are_in_the_timeline_under_their_phase_and_end_with_it():
    e, _ = engine()
    events = feed(e, *SYNC, "[SYNC] completed")
    ends = [(ev.phase, ev.parent) for ev in events
            if isinstance(ev, PhaseEvent) and ev.state == "completed"]
    assert ends[-2:] == [("sync_wait", "weight_sync"), ("weight_sync", None)]
    assert [(t["phase"], t["parent"]) for t in e.timeline()][1:] == [
        ("weight_sync", None), ("sync_actor", "weight_sync"), ("sync_wait", "weight_sync")]


def test_a_step_seen_without_its_phase_opens_the_phase():
    e, _ = engine()
    feed(e, "[SYNC] Waiting for rollout weights")
    assert (e.state()["phase"], e.state()["step"]) == ("weight_sync", "sync_wait")


def test_a_step_naming_an_unknown_parent_is_a_config_error():
    bad = "pack: b\nphases:\n  - id: s\n    parent: nowhere\n    start: x\n"
    with pytest.raises(ConfigErrors) as caught:
        RuleSet([load_pack_text(bad, "b.yaml")])
    assert "b.yaml:3: rule s: `parent: nowhere` names no phase" in str(caught.value)


def test_generic_phase_inside_a_pack_phase_is_a_step_until_the_loop_moves_on():
    e, _ = engine()
    feed(e, "step 1 loss 2.0", "Saving checkpoint to /ckpt/step-1")
    assert (e.state()["phase"], e.state()["step"]) == ("loop", "generic:checkpoint_save")
    feed(e, "step 2 loss 1.9")
    assert (e.state()["phase"], e.state()["step"], e.state()["last_step"]) == (
        "loop", None, "generic:checkpoint_save")


def test_generic_phase_with_no_pack_phase_open_is_the_phase():
    e, _ = engine()
    feed(e, "Evaluating on the validation set", "Saving checkpoint shard 3/8")
    assert (e.state()["phase"], e.state()["last_completed"]) == (
        "generic:checkpoint_save", "generic:evaluation")


def test_a_pack_rule_on_the_same_line_outranks_the_generic_layer():
    rules = RuleSet([load_pack_text(GENERIC, "g.yaml"), load_pack_text(
        "pack: p\nsignals:\n  - id: mine\n    match: 'NCCL timed out'\n    advice: [x]\n"
        "noise:\n  - id: spew\n    match: 'DEBUG'\n", "p.yaml")])
    match = rules.match("rank 3: NCCL timed out")
    assert match is not None and [s.id for s in match.signals] == ["mine"]
    generic = rules.match("request timed out")
    assert generic is not None and [s.id for s in generic.signals] == ["generic:timeout"]
    quiet = rules.match("DEBUG saving checkpoint meta")
    assert quiet is not None and quiet.phase_starts == () and quiet.noise is not None


def test_a_generic_line_repeating_is_judged_by_the_wait_loop_detector():
    e, clock = engine(stall=60.0)
    feed(e, "Evaluating on the validation set")
    for _ in range(5):
        clock.advance(20)
        assert feed(e, "Evaluating on the validation set") == []
    [stall] = e.tick()
    assert isinstance(stall, StallEvent) and stall.waits[0].count == 4


def test_generic_ids_are_namespaced_and_the_layer_may_not_hold_finish():
    rules = load_rule_set()
    assert rules.phase("generic:checkpoint_save") is not None
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text("pack: g\nlayer: generic\nfinish:\n  - id: f\n    match: x\n", "g.yaml")
    assert "`finish` belongs in a pack" in str(caught.value)


PROBE = 'INFO:     10.0.0.7:{port} - "GET /health HTTP/1.1" 200 OK'


@pytest.mark.parametrize("with_noise", [True, False])
def test_generic_noise_keeps_health_probes_after_the_last_step_from_looking_like_progress(
        with_noise: bool) -> None:
    noise = "noise:\n  - id: probe\n    match: '\"GET /health HTTP/1\\.1\" 200'\n"
    clock = FakeClock()
    rules = RuleSet([load_pack_text(GENERIC + (noise if with_noise else ""), "g.yaml")])
    e = Engine(rules, default_stall=60.0, clock=clock)
    feed(e, "processing batch 7")
    clock.advance(50)
    feed(e, PROBE.format(port=41000))
    clock.advance(20)
    stalls = [ev for ev in e.tick() if isinstance(ev, StallEvent)]
    assert bool(stalls) is with_noise


def test_the_shipped_generic_noise_names_probes_and_idle_metrics_not_real_work():
    rules = load_rule_set()
    noise = [n for n in rules.noise if n.origin.generic]
    quiet = ['INFO:     127.0.0.1:5123 - "GET /metrics HTTP/1.1" 200 OK',
             '10.1.2.3 - - [12/May/2026 07:54:55] "GET /healthz HTTP/1.1" 200 -',
             '"HEAD /ready HTTP/1.1" 200',
             "INFO 05-12 07:54:39 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 "
             "tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 "
             "reqs, GPU KV cache usage: 0.0%"]
    busy = ['INFO:     172.17.0.1:54010 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            '"GET /health HTTP/1.1" 503 Service Unavailable',
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 60.0 "
            "tokens/s, Running: 8 reqs, Waiting: 0 reqs"]
    for line in quiet:
        assert any(regex.search(n.match, line) for n in noise), line
    for line in busy:
        assert not any(regex.search(n.match, line) for n in noise), line


def test_threshold_precedence_phase_stall_then_given_stall_then_stall_after():
    e, _ = engine(stall=180.0)
    feed(e, "[SYNC] Starting weight synchronization")
    assert e.threshold_from() == (20 * 60, "stall_after of weight_sync in t")
    given, _ = engine(stall=180.0, stall_given=True)
    feed(given, "[SYNC] Starting weight synchronization")
    assert given.threshold_from() == (180.0, "--stall")
    per_phase, _ = engine(stall=180.0, stall_given=True, phase_stall={"sync_wait": 30.0})
    feed(per_phase, "[SYNC] Starting weight synchronization")
    assert per_phase.threshold_from() == (180.0, "--stall")
    feed(per_phase, "[SYNC] Waiting for rollout weights")
    assert per_phase.threshold_from() == (30.0, "--phase-stall sync_wait")


# --- unfinished last lines, matched ahead ----------------------------------------------------

BAR = b"Generating train split: 0 examples [00:00, ? examples/s]"


def test_a_partial_line_names_its_phase_and_is_not_counted_again_when_it_ends():
    rules = load_rule_set()
    e = Engine(rules, default_stall=60.0, clock=FakeClock())
    e.feed_block("log", b"loading the job\n")
    events = e.feed_partial("log", BAR)
    assert [(ev.phase, ev.line) for ev in events if isinstance(ev, PhaseEvent)] == [
        ("data_load", 2)]
    assert e.feed_partial("log", BAR) == []  # offered again: nothing new
    assert e.feed_block("log", BAR + b"\nnext line\n") == []
    assert e.lines["log"] == 3


def test_a_partial_line_that_grows_before_it_ends_is_matched_as_it_ends():
    e, _ = engine()
    e.feed_partial("log", b"ROLLOUT init")
    events = e.feed_block("log", b"ROLLOUT init DONE\n")
    assert [(ev.phase, ev.state) for ev in events if isinstance(ev, PhaseEvent)] == [
        ("rollout_init", "completed")]
    assert e.lines["log"] == 1


def test_a_collective_timeout_names_what_the_job_was_doing_and_the_collective():
    e = Engine(load_rule_set(), default_stall=600.0, clock=FakeClock())
    for line in ["step 120 loss 1.93", "Running evaluation on 2048 samples",
                 "[rank1]:[E1123 10:41:07.154629 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog "
                 "caught collective operation timeout: WorkNCCL(SeqNum=1204, OpType=ALLREDUCE, "
                 "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600018 milliseconds before "
                 "timing out."]:
        e.feed_line("log", line)
    [signal] = [s for s in e.state()["signals"] if s["id"] == "nccl_collective_timeout"]
    assert signal["context"] == ("during Evaluation or validation (generic:evaluation) in "
                                 "Training loop; collective ALLREDUCE SeqNum 1204")
    stall = e.diagnosis()
    assert any("during Evaluation or validation" in a.because for a in stall.advice)


def test_a_generic_phase_that_does_not_nest_is_no_step_inside_a_pack_phase():
    e, _ = engine()
    events = feed(e, "step 1 loss 2.0", "Processing batch 1", "step 2 loss 1.9",
                  "Processing batch 2")
    assert [ev.phase for ev in events if isinstance(ev, PhaseEvent)] == ["loop"]
    assert (e.state()["phase"], e.state()["step"]) == ("loop", None)
    fresh, _ = engine()
    feed(fresh, "Processing batch 1")  # no pack phase open: it names the phase
    assert fresh.state()["phase"] == "generic:train_loop"


KINDED = r"""
pack: engine
phases:
  - id: engine_init
    kind: model_load
    start: 'engine init begins'
    done: 'engine ready'
    advice: ["the engine"]
  - id: engine_loop
    kind: train_loop
    start: 'engine step \d+'
    advice: ["its loop"]
"""


def test_a_generic_loop_seen_while_a_packs_earlier_kind_of_phase_is_open_is_the_phase():
    rules = RuleSet([load_pack_text(GENERIC, "g.yaml"), load_pack_text(KINDED, "e.yaml")])
    e = Engine(rules, default_stall=600.0, clock=FakeClock())
    feed(e, "engine init begins", "Processing batch 1")  # the init's end line never came
    assert (e.state()["phase"], e.state()["step"]) == ("generic:train_loop", None)
    own = Engine(rules, default_stall=600.0, clock=FakeClock())
    feed(own, "engine step 1", "Processing batch 1")  # the pack's own loop says more
    assert (own.state()["phase"], own.state()["step"]) == ("engine_loop", None)


SERVER = r"""
pack: server
phases:
  - id: server_init
    kind: model_load
    start: 'server loading'
    done: 'server ready'
    advice: ["its load"]
  - id: server_requests
    kind: train_loop
    start: 'Running: [1-9]\d* reqs'
    nests: false
    advice: ["its requests"]
"""


@pytest.mark.parametrize("prefiltered", [True, False])
def test_a_pack_phase_that_does_not_nest_is_silent_inside_another_packs_phase(prefiltered):
    # An RL trainer's rollout drives an inference engine whose stats say requests are
    # running: the rollout is where the job is. The same stats with no trainer's phase open,
    # or inside the engine's own pack, name the engine's requests.
    from hangwatch.core.prefilter import build_prefilter

    rules = RuleSet([load_pack_text(GENERIC, "g.yaml"), load_pack_text(PACK, "t.yaml"),
                     load_pack_text(SERVER, "s.yaml")])

    def state(*lines: str) -> tuple[str | None, str | None]:
        e = Engine(rules, default_stall=600.0, clock=FakeClock(),
                   prefilter=build_prefilter(rules) if prefiltered else None)
        e.feed_block("log", "".join(f"{line}\n" for line in lines).encode())
        return e.state()["phase"], e.state()["step"]

    stats = "Engine 000: Running: 2 reqs, Waiting: 0 reqs"
    assert state("ROLLOUT init START", stats, stats) == ("rollout_init", None)
    assert state(stats) == ("server_requests", None)
    assert state("server loading", "server ready", stats) == ("server_requests", None)


@pytest.mark.parametrize("prefiltered", [True, False])
def test_a_healthy_loop_that_uses_the_generic_words_is_never_called_stalled(prefiltered):
    # Ten minutes of a healthy job, two lines a second: steps advance; a checkpoint is
    # written every 200 steps (its shards take a few seconds); each epoch ends with an
    # evaluation; and a `waiting for ...` line comes between steps in a fast loop. The
    # generic layer names where the job is; none of it is a stall at a 60 s threshold.
    from hangwatch.core.prefilter import build_prefilter

    rules = load_rule_set()
    clock = FakeClock()
    e = Engine(rules, default_stall=60.0, clock=clock,
               prefilter=build_prefilter(rules) if prefiltered else None)
    events: list = []
    for second in range(600):
        step = second * 2
        lines = [f"2024-05-02 10:{second // 60:02d}:{second % 60:02d} INFO epoch {step // 300} "
                 f"step {step} loss 1.{step % 97:02d}",
                 "waiting for the next batch from the data loader (queue size 4)"]
        if step % 200 == 0:
            lines += [f"Saving model checkpoint to /ckpt/step_{step}",
                      *(f"writing shard {i} of 4" for i in range(1, 5))]
        if step % 300 == 298:
            lines += ["Running evaluation on the validation set", "Evaluation [50/100]",
                      "Evaluation [100/100] accuracy 0.81"]
        events += e.feed_block("train.log", "".join(f"{line}\n" for line in lines).encode())
        clock.advance(1.0)
        events += e.tick()
    assert not any(isinstance(ev, StallEvent) for ev in events)
    named = {ev.phase for ev in events if isinstance(ev, PhaseEvent)}
    assert {"generic:checkpoint_save", "generic:evaluation"} <= named
    assert named & {"train_loop", "generic:train_loop"}  # a pack's loop, or the generic one
