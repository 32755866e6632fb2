"""What came before a stop line (core/before.py) and the place expected between phases
(core/order.py), alone and through the engine."""

from __future__ import annotations

import pytest

from hangwatch.core.before import (
    BEFORE_LINES,
    INTERRUPTED,
    bar_at_end,
    interrupted,
    place_at_silence,
    place_before,
    stack_place,
)
from hangwatch.core.clock import FakeClock
from hangwatch.core.engine import Engine
from hangwatch.core.order import USUAL, expected_next
from hangwatch.core.prefilter import build_prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_pack_text, load_rule_set

TIMEOUT = ("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
           "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=600000) "
           "ran for 600004 milliseconds before timing out.")
PACK = """
pack: boot
phases:
  - id: fetch_env
    title: Fetching the environment
    start: 'fetching env'
    done: 'env ready'
  - id: spawn_workers
    title: Spawning workers
    start: 'spawning \\\\d+ workers'
"""


def engine(rules: RuleSet | None = None) -> Engine:
    return Engine(rules or load_rule_set(), default_stall=600.0, clock=FakeClock())


def starts_of(rules: RuleSet):
    def starts(text: str):
        found = rules.match(text)
        return found.phase_starts if found is not None else ()
    return starts


# --- what came before ------------------------------------------------------------------------

def test_a_timeout_with_no_phase_open_takes_the_phase_of_the_lines_before_it():
    e = engine()
    for line in ["Sampling: 45%|####5     | 9/20 [01:23<01:40]", "rank 3 still busy",
                 TIMEOUT]:
        e.feed_line("log", line)
    state = e.state()
    assert state["phase"] == "generic:evaluation"
    assert "named by the line before the stop" in state["context"]
    assert "2 line(s) before" in state["context"]


def test_a_packs_signal_carries_the_kind_of_trouble_it_declares_in_its_event_and_state():
    e = engine()
    events = e.feed_line("log", TIMEOUT)
    kinds = [getattr(ev, "kind", None) for ev in events if type(ev).__name__ == "SignalEvent"]
    assert kinds == ["timeout"]
    assert [(s["id"], s["kind"]) for s in e.state()["signals"]] == [
        ("nccl_collective_timeout", "timeout")]


def test_a_packs_catch_all_signal_takes_the_kind_its_lines_words_say():
    e = engine()
    refused = ("node1:2217:2490 [0] NCCL WARN socketStartConnect: Connect to "
               "10.0.0.12<48231> failed : Connection refused")
    events = e.feed_line("log", refused)
    [warn] = [ev for ev in events if type(ev).__name__ == "SignalEvent"]
    assert (warn.id, warn.kind) == ("nccl_warn", "connection_error")
    assert [(s["id"], s["kind"]) for s in e.state()["signals"]] == [
        ("nccl_warn", "connection_error")]
    other = engine()  # a warning no generic signal's words name has no kind
    other.feed_line("log", "node1:2217:2490 [0] NCCL WARN Cuda failure 'invalid device'")
    assert [s["kind"] for s in other.state()["signals"]] == [None]


def test_a_progress_bar_after_the_phase_line_is_the_place_shown():
    rules = load_rule_set()
    lines = ["Running evaluation", " 45%|####5     | 450/1000 [01:23<01:40, 5.4it/s]",
             "[E] rank 1 stack trace follows"]
    place = place_before(lines, TIMEOUT, starts_of(rules))
    assert place is not None and place.phase is not None
    assert place.phase.id == "generic:evaluation"
    assert place.counter.startswith("45%") and place.back == 2


def test_a_line_announcing_an_action_just_before_a_stop_line_is_its_place():
    rules = load_rule_set()
    stop = ("torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 1486799 "
            "closing signal SIGINT")  # the launcher passing on a user's Ctrl-C
    place = place_before(["[RANK:0] Starting batch_runner...", "", "", stop], stop,
                         lambda _text: (), lambda phase_id: rules.phase(f"generic:{phase_id}"))
    assert place is not None and place.phase is not None
    assert (place.phase.id, place.back) == ("generic:train_loop", 4)  # the other ranks' too


def test_stop_lines_before_a_stop_line_are_passed_over_and_the_window_is_bounded():
    rules = load_rule_set()
    spew = [TIMEOUT.replace("rank0", f"rank{i}") for i in range(5)]
    assert place_before(["Preparing the corpus", *spew], TIMEOUT, starts_of(rules)).phase.id == \
        "generic:data_load"
    far = ["Preparing the corpus", *["nothing here"] * BEFORE_LINES]
    assert place_before(far, TIMEOUT, starts_of(rules)) is None


def test_a_place_printed_hours_before_by_its_timestamp_is_not_taken():
    rules = load_rule_set()
    lines = ["2026-01-01 08:00:00 Loading dataset"]
    stop = "2026-01-01 12:00:00 " + TIMEOUT
    assert place_before(lines, stop, starts_of(rules)) is None
    assert place_before(lines, "2026-01-01 08:30:00 " + TIMEOUT, starts_of(rules)) is not None


def test_with_a_phase_open_the_place_goes_beside_it_in_the_signals_context():
    e = engine()
    bar = " 45%|####5     | 450/1000 [01:23<01:40, 5.4it/s]"
    for line in ["Preparing the corpus", bar, TIMEOUT]:
        e.feed_line("log", line)
    state = e.state()
    assert state["phase"] == "generic:data_load"
    [signal] = [s for s in state["signals"] if s["id"] == "nccl_collective_timeout"]
    assert "before the stop: Loading data (generic:data_load)" in signal["context"]
    assert "450/1000" in signal["context"]


def test_a_place_named_after_the_fact_is_not_progress():
    clock = FakeClock()
    e = Engine(load_rule_set(), default_stall=60.0, clock=clock)
    e.feed_line("log", "Tokenizing: 45%|####5     | 450/1000")
    clock.advance(50.0)
    e.feed_line("log", TIMEOUT)
    assert e.idle() >= 50.0


SIGINT = ("^C[2024-04-23 22:04:33,011] torch.distributed.elastic.agent.server.api: [WARNING] "
          "Received Signals.SIGINT death signal, shutting down workers")
CLOSING = ("[2024-04-23 22:04:33,012] torch.distributed.elastic.multiprocessing.api: [WARNING] "
           "Sending process 1486799 closing signal SIGINT")


def test_a_shutdown_said_by_a_line_about_an_outside_signal_is_no_place_the_lines_before_are():
    e = engine()
    for line in ["[2024-04-23 21:39:51,276] [INFO] [RANK:0] Starting trainer...", SIGINT,
                 CLOSING]:
        e.feed_line("log", line)
    state = e.state()
    assert state["phase"] == "generic:train_loop"
    assert "named by the line before the stop" in state["context"]


@pytest.mark.parametrize(("last", "phase"), [
    ("Received SIGTERM, shutting down", "generic:data_load"),
    ("^CWARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting "
     "down workers", "generic:data_load"),
    ("Data written, shutting down", "generic:shutdown")])
def test_a_shutdown_opens_only_when_no_outside_signal_stopped_the_job(last, phase):
    e = engine()
    for line in ["Tokenizing:  45%|####5     | 450/1000 [01:23<01:40]", last]:
        e.feed_line("log", line)
    assert e.state()["phase"] == phase


def test_a_bar_whose_description_names_an_evaluation_ends_the_training_loop_it_follows():
    e = engine()
    for line in ["epoch: [1/100], iter: 1100, lr: 0.001000, loss: 1.579126, batch_cost: 0.62 s",
                 "eval model::  89% 178/200 [27:24<00:15,  1.42it/s]"]:
        e.feed_line("log", line)
    assert e.state()["phase"] == "generic:evaluation"


def test_at_the_silence_a_line_about_an_outside_signal_is_passed_over():
    e = engine()
    for line in [" 45%|####5     | 450/1000 [01:23<01:40, 5.4it/s]",
                 "Received SIGTERM, shutting down the workers"]:
        e.feed_line("log", line)
    state = e.state()
    assert state["phase"] is None and state["place"] == "generic:train_loop"


def test_a_stop_line_reads_the_same_lines_across_blocks_and_line_by_line():
    data = b"".join(x.encode() + b"\n" for x in
                    ["Sampling 3/50", "rank 3 still busy", TIMEOUT])
    by_line, by_block = engine(), engine()
    for line in data.decode().splitlines():
        by_line.feed_line("log", line)
    by_block.feed_block("log", data[:40].rsplit(b"\n", 1)[0] + b"\n")
    by_block.feed_block("log", data[len(data[:40].rsplit(b"\n", 1)[0]) + 1:])
    assert by_line.state()["context"] == by_block.state()["context"] != ""


# --- where the last lines show the job went quiet ---------------------------------------------

def fed(lines: list[str], rules: RuleSet | None = None, prefilter: bool = False) -> Engine:
    e = engine(rules) if not prefilter else Engine(
        rules or load_rule_set(), default_stall=600.0, clock=FakeClock(),
        prefilter=build_prefilter(rules or load_rule_set(), None))
    e.feed_block("log", b"".join(x.encode() + b"\n" for x in lines))
    return e


def test_a_bar_whose_words_name_a_loop_places_a_silence_with_nothing_open():
    state = fed(["model ready", "Scoring test set: 45%|####5 | 9/20 [00:03<00:04]"]).state()
    assert state["phase"] is None and state["place"] == "generic:evaluation"
    assert state["context"].startswith("where it went quiet: Evaluation or validation")
    assert "1 line(s) from the end: Scoring test set: 45%" in state["context"]


def test_a_bare_bar_nothing_names_is_taken_as_the_main_loop_and_says_so():
    state = fed(["100%|##########| 100/100 [01:22<00:00]", " 34%|###3 | 670/2000 [14:58<29:42]"]
                ).state()
    assert state["place"] == "generic:train_loop"
    assert ("Training loop (generic:train_loop), a bar with no words taken as a training "
            "job's main loop, 1 line(s) from the end: 34%|###3 | 670/2000") in state["context"]


def test_tqdms_meter_alone_as_a_notebook_shows_it_is_a_bar():
    state = fed(["100%", "18679/18686 [1:50:07<00:02, 2.83it/s]"]).state()
    assert state["place"] == "generic:train_loop" and "18679/18686" in state["context"]
    announced = fed(["Infer at iteration 0", "100%", "9/20 [00:03<00:04, 2.83it/s]"]).state()
    assert announced["place"] == "generic:evaluation"


def test_a_bare_bar_takes_its_loop_from_the_line_announcing_it():
    state = fed(["Use checkpoint model.pth.tar", "Infer at iteration 0", "  0%|    | 0/654"]
                ).state()
    assert state["place"] == "generic:evaluation"
    assert "a bar with no words" not in state["context"]
    far = fed(["Infer at iteration 0", "a", "b", "c", "  0%|    | 0/654"]).state()
    assert far["place"] == "generic:train_loop"  # too far back to announce it
    # an announcement names the bar after it by its words, a bar's words or not
    workers = fed(["controller INFO: Configuration has 4 model_worker.",
                   "controller INFO: Connecting to workers...", "  0%|    | 0/5 [00:00<?, ?it/s]"]
                  ).state()
    assert workers["place"] == "generic:resource_wait"


def test_a_bar_counting_a_models_named_tensors_is_its_load():
    state = fed(["engine: tp=2, dtype=bfloat16",
                 "mlp1.3.weight:  42%|####      | 5/12 [00:00<00:00, 187.57w/s, dev=1]",
                 "language_model.model.layers.47.ffn_norm.weight:  75%|#######   | 9/12 "
                 "[00:00<00:00, 212.27w/s, dev=cpu]"]).state()
    assert state["place"] == "generic:model_load"
    assert "a bar with no words" not in state["context"]


def test_a_bare_bar_after_training_metrics_is_the_training_loop_and_an_eval_loss_evaluation():
    train = fed(["{'loss': 0.0117, 'learning_rate': 6.9e-05, 'epoch': 0.99}",
                 " 33%|###3 | 1128/3384 [05:28<10:53,  3.45it/s]"]).state()
    assert train["place"] == "generic:train_loop"
    assert "1128/3384" in train["context"]
    evaluating = fed(["step 40 eval_loss=2.31 eval_acc=0.4"]).state()
    assert evaluating["place"] == "generic:evaluation"
    diverged = fed(["{'eval_loss': nan, 'eval_runtime': 543.3, 'epoch': 0.0}"]).state()
    assert diverged["place"] == "generic:evaluation"  # a diverged loss is still a loss
    # an evaluation's metrics are its report, printed as it ends: the bar after them counts
    # the training loop's batches again
    resumed = fed(["{'eval_loss': 1.0897, 'eval_runtime': 3.6467, 'epoch': 1.03}", "",
                   " 35%|###5 | 302/873 [27:20<51:27,  5.41s/it]"]).state()
    assert resumed["place"] == "generic:train_loop"
    assert "302/873" in resumed["context"]


def test_dates_and_channel_numbers_are_no_counter_at_the_silence():
    state = fed(["[09/03 14:31:46 d2.utils.env]: Using a generated random seed 46115224",
                 "node:1:1 [1] NCCL INFO Channel 22/0 : 1[1] -> 0[0] via P2P/IPC/read"]).state()
    assert state["place"] is None and state["context"] == ""


def test_a_launchers_own_step_is_no_counter_and_a_training_step_still_is():
    launcher = fed(["Launching cluster", "Step 12/12: Running health checks"]).state()
    assert launcher["place"] is None and launcher["context"] == ""
    stop = "Step 4/4: Waiting for nodes... timed out"
    assert place_before(["Step 3/4: Installing packages."], stop, lambda _: ()) is None
    counted = fed(["model ready", "step 12 | 1.21 s/it"]).state()
    assert counted["place"] == "generic:train_loop"
    assert fed(["model ready", "Step 12/100: loss=2.314"]).state()["phase"] == \
        "generic:train_loop"


def test_a_bar_of_the_phase_completed_last_leaves_the_place_to_what_is_between():
    rules = RuleSet([*load_rule_set().packs, load_pack_text(PACK, "boot.yaml")])
    state = fed(["fetching env", "Tokenizing: 45%|####5 | 450/1000 [00:01<00:01]",
                 "env ready"], rules).state()
    assert state["place"] is None and state["context"] == ""
    assert state["between"].startswith("after Fetching the environment")


def test_the_silence_is_placed_the_same_through_the_prefilter_and_line_by_line():
    lines = ["setup done", "{'loss': 0.5, 'epoch': 1}", "junk 3/4", " 12%|# | 12/100 [00:01<00:09]"]
    by_line = engine()
    for line in lines:
        by_line.feed_line("log", line)
    assert by_line.state()["place"] == fed(lines, prefilter=True).state()["place"] == \
        "generic:train_loop"


def test_progress_after_the_silence_moves_the_place_on():
    e = fed(["Scoring test set: 45%|####5 | 9/20 [00:03<00:04]"])
    assert e.state()["place"] == "generic:evaluation"
    e.feed_line("log", "Saving checkpoint to /ckpt/step_100")
    assert e.state()["place"] is None and e.state()["phase"] == "generic:checkpoint_save"


def silence_of(lines: list[str]):
    """`place_at_silence` with no rule's START: only an announcement's own words can name it."""
    rules = load_rule_set()
    return place_at_silence(lines, lambda _text: (),
                            lambda phase_id: rules.phase(f"generic:{phase_id}"))


def test_a_last_line_announcing_an_action_names_the_silence_by_its_words():
    cases = {
        "misc_utils:20 [INFO] Starting train": "generic:train_loop",
        "**Initializing horovod**": "generic:distributed_init",
        "building train, validation, and test datasets for GPT ...": "generic:data_load",
        "Monitoring job until status is any of ['Succeeded', 'Failed'].":
            "generic:resource_wait",
        "Loading VLM prism-7b from Checkpoint; Freezing": "generic:model_load",
        "Compiling the fused kernels...": "generic:build",
        "INFO [train.py:1100] (2/3) Computing validation loss": "generic:evaluation",
        "start loading /root/ckpt/opt_66b/14-restored.pt...": "generic:model_load",
        # workers set up: the job waits for them (not an evaluation, for all "rollout" says)
        "rollout_worker 0 INFO: Running rollout_worker lazy initialization... [repeated 3x]":
            "generic:resource_wait",
        "controller INFO: Connecting to workers...": "generic:resource_wait",
        # a model's parameters fitted to memory are its load, not a Keras `fit`
        "I common_init_result: fitting params to device memory ...": "generic:model_load",
        # an RL trainer's "actor" is its policy: the timer starts the policy's training
        "(MegatronTrainRayActor pid=19450) timer.py:24 - Timer actor_train start":
            "generic:train_loop",
    }
    for line, phase in cases.items():
        place = silence_of(["setup", line, "[warn] 1 more process has sent help message"])
        assert place is not None and place.phase is not None, line
        assert (place.phase.id, place.back, place.text) == (phase, 2, line)
    state = fed(["setup", "misc_utils:20 [INFO] Starting batch_runner", "1 more message"]).state()
    assert state["phase"] is None and state["place"] == "generic:train_loop"
    assert "2 line(s) from the end: misc_utils:20 [INFO] Starting batch_runner" in \
        state["context"]


def test_an_announcement_a_later_line_says_finished_or_too_far_back_names_nothing():
    past = silence_of(["Starting train", "assemble_training_data took 1.07 seconds"])
    assert past is not None and past.finished and past.phase is not None
    assert past.phase.id == "generic:data_load"  # past the newer line's action, not in train
    assert silence_of(["Starting train", "a", "b", "c", "d", "e"]) is None
    assert silence_of(["the model has 7B parameters", "world size 8"]) is None  # no action


def test_a_bar_newer_than_an_announcement_names_the_silence_and_an_older_one_does_not():
    place = silence_of(["Starting train", "Scoring test set: 45%|####5 | 9/20 [00:03<00:04]"])
    assert place is not None and place.phase is not None
    assert place.phase.id == "generic:evaluation"
    newer = silence_of(["Scoring test set: 45%|####5 | 9/20 [00:03<00:04]", "Saving shards ..."])
    assert newer is not None and newer.phase is not None
    assert newer.phase.id == "generic:checkpoint_save"


def test_an_announcements_words_end_where_its_details_start():
    place = silence_of(["INFO llm_engine.py:72] Initializing an LLM engine with config: "
                        "model='/m', tokenizer='/m', download_dir=None, load_format=auto"])
    assert place is not None and place.phase is not None
    assert place.phase.id == "generic:model_load"  # not the data words of its settings
    header = silence_of(["data_loader.py:20 [INFO] Starting train"])
    assert header is not None and header.phase is not None
    assert header.phase.id == "generic:train_loop"  # not the logger's file name


def test_bracket_and_glyph_bars_of_keras_chainer_click_and_rich_are_bars_named_by_words():
    cases = [
        (["this epoch [###########################.......................] 54.35%",
          "       300 iter, 0 epoch / 15 epochs",
          "   0.69902 iters/sec. Estimated time to finish: 3:10:15.971187."],
         "generic:train_loop", "this epoch [####"),
        (["epoch 3/10", "120/500 [=====>........................] - ETA: 1:23 - acc: 0.5"],
         "generic:train_loop", "120/500 [====="),
        (["Indexing shards  [###################################-]  5028/5029  00:00:15"],
         "generic:data_load", "Indexing shards"),
        (["      1/200      23G      1.663     0.9309         40       1600: 95% "
          "\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2500 41/43 2.7it/s 15.5s<0.7s"],
         "generic:train_loop", "1/200"),  # Ultralytics' bar of box glyphs, no words: the loop
    ]
    for lines, phase, shown in cases:
        place = silence_of(lines)
        assert place is not None and place.phase is not None, lines
        assert place.phase.id == phase and place.text.startswith(shown)
    assert silence_of(["see [link] and [........] here"]) is None  # no count: no bar

def test_a_counters_words_run_to_its_first_detail_not_into_its_metrics():
    mxnet = silence_of(["2017-02-10 00:27:06,021 Host Epoch[0] Batch [4]\tSpeed: 24.24 "
                        "samples/sec\tTrain-fcn_valid=0.270395"])
    assert mxnet is not None and mxnet.phase is not None
    assert mxnet.phase.id == "generic:train_loop"  # not `samples`, not `valid`
    caffe = silence_of(["I0115 solver.cpp:362] Iteration 0, Testing net (#0)"])
    assert caffe is not None and caffe.phase is not None
    assert caffe.phase.id == "generic:evaluation"


def test_a_line_saying_an_action_finished_places_the_silence_after_it():
    e = fed(["I0730 time_manager.py:50] 0023497> heatmaps_mse = 0.000477729",
             "I0730 checkpoint_manager.py:86] CheckpointManager::save_all call done"])
    state = e.state()
    assert state["phase"] is None and state["place"] is None  # past it, not in it
    assert "Saving a checkpoint (generic:checkpoint_save) finished, 1 line(s) from the end" \
        in state["context"]
    assert state["between"].startswith("after Saving a checkpoint (generic:checkpoint_save), "
                                       "before Training loop (generic:train_loop) or ")
    # A loop's last count is no end of its phase: the evaluator goes on after it.
    last_count = silence_of(["Inference done 4313/4313. 0.0726 s / img. ETA=0:00:00"])
    assert last_count is None or not last_count.finished


def test_one_pass_of_a_loop_said_finished_is_no_end_of_the_loop():
    # a callback finished on the first of two validation steps: the validation goes on
    lines = ["[RANK 0] waiting for all ranks to finish",
             "[RANK 0] Callback ValidationDrawSample finished on validation_step_end step 5 [1/2]"]
    place = silence_of(lines)
    assert place is None or not place.finished
    last = silence_of(["Callback ValidationDrawSample finished on validation_step_end [2/2]"])
    assert last is None or not last.finished  # its last count: the loop's own end, as before


def test_start_at_a_lines_end_announces_and_noise_lines_do_not_push_it_out_of_reach():
    probe = '(SGLangEngine pid=1) INFO:     172.17.0.11:41646 - "GET /metrics HTTP/1.1" 200 OK'
    lines = ["(MegatronTrainRayActor pid=19450) [2026-03-24 06:36:50] timer.py:24 - Timer "
             "actor_train start", *[probe] * 8]
    state = fed(lines).state()
    assert state["place"] == "generic:train_loop"
    assert "9 line(s) from the end: (MegatronTrainRayActor" in state["context"]
    assert silence_of(lines) is None  # without the engine's noise rules: too far back


CTRL_C = """\
^CTraceback (most recent call last):
  File "train.py", line 88, in <module>
    main()
  File "train.py", line 61, in main
    dist.barrier()
  File "/e/site-packages/torch/distributed/c10d_logger.py", line 72, in wrapper
    return func(*args, **kwargs)
  File "/e/site-packages/torch/distributed/distributed_c10d.py", line 3439, in barrier
    work.wait()
KeyboardInterrupt""".splitlines()
FAULTHANDLER = """\
Timeout (0:10:00)!
Thread 0x00007f3a1c9ff700 (most recent call first):
  File "/usr/lib/python3.10/threading.py", line 320 in wait
  File "/e/dist-packages/torch/utils/data/dataloader.py", line 1133 in _try_get_data
  File "/e/dist-packages/torch/utils/data/dataloader.py", line 1294 in _get_data
  File "train.py", line 40 in train_one_epoch""".splitlines()
PY_SPY = """\
Process 4121: python train.py
Python v3.10.12 (/usr/bin/python3.10)

Thread 4121 (idle): "MainThread"
    read (safetensors/torch.py:311)
    load_file (safetensors/torch.py:313)
    from_pretrained (transformers/modeling_utils.py:3850)
    main (train.py:22)""".splitlines()


def stack_place_of(lines: list[str]):
    """`stack_place` with the built-in stack rules, a rule's phase the generic layer's."""
    rules = load_rule_set()
    return stack_place(lines, rules.stack_rules, lambda kind: rules.phase(f"generic:{kind}"))


def phase_and_label(lines: list[str]) -> tuple[str | None, str] | None:
    """The phase (if any) and label of the place a printed stack names, None for no place."""
    place = stack_place_of(lines)
    if place is None:
        return None
    return (place.phase.id if place.phase is not None else None, place.label)


def place_of(*frames: str) -> str | None:
    """The phase a main thread's dump of these frames (innermost first) names, if any."""
    place = stack_place_of(['Thread 1 (idle): "MainThread"', *frames])
    return place.phase.id if place is not None and place.phase is not None else None


def test_a_stack_printed_at_the_end_names_where_the_job_was_by_its_innermost_known_frame():
    barrier = fed(["step 12 done", *CTRL_C]).state()
    assert barrier["place"] is None  # a collective is no phase of its own
    assert barrier["context"].startswith("where it went quiet: collective, ")
    assert "in barrier (torch/distributed/distributed_c10d.py)" in barrier["context"]
    data = fed(["epoch 3 started", "rank 0 quiet", *FAULTHANDLER]).state()
    assert data["phase"] == "generic:train_loop" and data["place"] is None  # one is open
    assert fed(["rank 0 quiet", *FAULTHANDLER]).state()["place"] == "generic:data_load"
    assert fed(PY_SPY).state()["place"] == "generic:model_load"


def test_a_collective_in_a_printed_stack_takes_its_place_from_the_framework_frame_calling_it():
    # py-spy's dump of a rank inside DeepSpeed's engine init, broadcasting the model: the
    # broadcast is a wait for peers, the engine's init the place. A barrier the training
    # script calls says nothing more (its frames are named by the file's name only).
    dump = ['Thread 4121 (active): "MainThread"',
            "    wrapper (torch/distributed/distributed_c10d.py:1436)",
            "    broadcast (torch/distributed/distributed_c10d.py:1500)",
            "    broadcast (deepspeed/comm/torch.py:78)",
            "    _broadcast_model (deepspeed/runtime/engine.py:1105)",
            "    __init__ (deepspeed/runtime/engine.py:297)",
            "    _inner_training_loop (transformers/trainer.py:1702)",
            "    <module> (train.py:64)"]
    assert phase_and_label(dump) == ("generic:distributed_init",
                                     "collective in DeepSpeed's engine init")
    place = stack_place_of(dump)
    assert place is not None
    assert place.text == "in broadcast (torch/distributed/distributed_c10d.py)"
    assert fed(["rank 0 quiet", *dump]).state()["place"] == "generic:distributed_init"
    assert fed(["step 12 done", *CTRL_C]).state()["place"] is None


def test_a_wait_on_ray_tasks_takes_its_place_from_the_frame_that_called_it():
    # slime: the driver's ray.get inside the actors' weight update, a step of the training loop
    dump = ['Thread 1 (idle): "MainThread"',
            "    get_objects (ray/_private/worker.py:970)",
            "    get (ray/_private/worker.py:2882)",
            "    wrapper (ray/_private/client_mode_hook.py:104)",
            "    update_weights (slime/ray/actor_group.py:124)",
            "    train (train.py:34)"]
    assert phase_and_label(dump) == ("generic:train_loop", "waiting on Ray tasks in a weight sync")
    # with no caller a rule knows (the training script's frames are a guess), only the wait
    assert phase_and_label([*dump[:4], "    train (train.py:34)"]) == (None, "waiting on Ray tasks")


def test_the_call_a_cut_traceback_was_making_names_the_place():
    # a deadlocked data loader interrupted in the training script's own frame
    assert fed(["Traceback (most recent call last):",
                '  File "tools/train_net_step.py", line 415, in main',
                "    input_data = next(dataiterator)",
                "KeyboardInterrupt"]).state()["place"] == "generic:data_load"
    # the frame alone says the training loop (a guess, by its name); the call it made, the save
    assert place_of("    train (torchtitan/trainer.py:998)") == "generic:train_loop"
    assert phase_and_label([
        "[rank0]:Traceback (most recent call last):",
        '[rank0]:  File "/torchtitan/torchtitan/trainer.py", line 998, in train',
        "[rank0]:    self.checkpointer.save("]) == ("generic:checkpoint_save", "a checkpoint save")
    # a wait on Ray tasks, placed by the call that started it: a placement group
    assert phase_and_label([
        "Traceback (most recent call last):",
        '  File "/opt/nemo_rl/algorithms/grpo.py", line 452, in setup',
        "    ray.get(helper_pg.ready(), timeout=1000)",
        '  File "/opt/venv/site-packages/ray/_private/worker.py", line 2882, in get',
        "KeyboardInterrupt"]) == ("generic:resource_wait",
                                  "waiting on Ray tasks in a placement group waited for")


def test_a_download_said_done_leaves_the_job_preparing_what_it_fetched():
    # dtnn: the data downloaded, then unpacked into its database: the silence is that load
    state = fed(["No database found at `data_dir/gdb9.db`. Should GDB-9 data be downloaded to "
                 "that location? [y/N]y", "INFO - Downloading GDB-9 data...", "INFO - Done."]
                ).state()
    assert state["place"] == "generic:data_load"
    # a finish saying what finished is past it; an announcement that is no download is too
    assert fed(["INFO - Building the index...", "INFO - Done."]).state()["place"] is None


def test_init_announces_an_action_and_a_train_loss_is_the_training_loops():
    assert fed(["[INFO|configuration_utils.py:577] >> Generate config GenerationConfig {", "}",
                "06/13/2023 09:29:23 - INFO - __main__ - Init new peft model"]
               ).state()["place"] == "generic:model_load"
    assert fed(["100%|##########| 40/40 [00:00<00:00, 1391.75it/s]",
                "  0%|          | 0/160 [00:00<?, ?it/s, train_loss=0.625]"]
               ).state()["place"] == "generic:train_loop"
    assert fed(["  0%|          | 0/40 [00:00<?, ?it/s, val_loss=0.625]"]
               ).state()["place"] == "generic:evaluation"


def test_a_traceback_cut_at_its_head_still_names_an_evaluation_function():
    # habitat-baselines: Ctrl-C in its evaluation's poll for checkpoints
    state = fed(['habitat_baselines/common/base_trainer.py", line 102, in eval',
                 "    time.sleep(2)  # sleep for 2 secs before polling again",
                 "KeyboardInterrupt"]).state()
    assert state["place"] == "generic:evaluation"
    assert place_of("    evaluate (tools/run.py:88)", "    main (tools/run.py:120)") == \
        "generic:evaluation"


def test_an_inference_engines_step_in_a_printed_stack_is_serving():
    # SGLang's own dump of a scheduler inside a batch, run from a source checkout
    dump = ["#64 forward_batch_generation from /sgl-workspace/sglang/python/sglang/srt/"
            "managers/tp_worker.py:239",
            "#65 run_batch from /sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py:1801",
            "#66 event_loop_normal_disagg_prefill from /sgl-workspace/sglang/python/sglang/srt/"
            "disaggregation/prefill.py:294"]
    assert fed(["rank 0 quiet", *dump]).state()["place"] == "generic:serving"
    assert place_of("    step (vllm/v1/engine/core.py:240)",
                    "    run_busy_loop (vllm/v1/engine/core.py:600)") == "generic:serving"


def test_a_model_wrapped_for_data_parallel_in_a_printed_stack_is_distributed_init():
    # DDP's constructor checks the parameters' shapes across ranks: its first collective
    state = fed(["[rank14]:   File \"/x/mnist.py\", line 55, in train",
                 "[rank14]:     model = DistributedDataParallel(model, device_ids=[local_rank])",
                 "[rank14]:   File \"/usr/lib/python3.12/dist-packages/torch/nn/parallel/"
                 "distributed.py\", line 835, in __init__",
                 "[rank14]:     _verify_param_shape_across_processes(self.process_group, p)"]
                ).state()
    assert state["place"] == "generic:distributed_init"
    assert place_of("    get_xla_supported_devices (torch_xla/core/xla_model.py:42)",
                    "    xla_device (torch_xla/core/xla_model.py:143)") == \
        "generic:distributed_init"


def test_a_web_servers_loop_and_an_engines_communicator_in_printed_stacks():
    assert place_of("    _on_sigint (asyncio/runners.py:157)",
                    "    capture_signals (uvicorn/server.py:328)") == "generic:serving"
    # a collective of vLLM's own communicator is placed by the frame that called it
    assert place_of("    all_reduce (vllm/distributed/device_communicators/pynccl.py:175)",
                    "    __init__ (vllm/distributed/device_communicators/pynccl.py:142)",
                    "    __init__ (vllm/distributed/device_communicators/cuda_communicator.py:75)"
                    ) == "generic:distributed_init"


def test_the_cpp_backtrace_of_a_torch_error_is_a_printed_stack():
    frames = ["(main_task pid=8405) frame #3: c10d::TCPStore::get(std::string const&) + 0x7a "
              "(0x7f7e8d3b883a in /x/site-packages/torch/lib/libtorch_cpu.so)",
              "(main_task pid=8405) frame #7: c10d::ProcessGroupNCCL::broadcastUniqueNCCLID("
              "ncclUniqueId*, bool, std::string const&, int) + 0xaf (0x7f7e5302eebf in "
              "/x/site-packages/torch/lib/libtorch_cuda.so)"]
    state = fed(["rank 0 quiet", *frames]).state()
    assert state["place"] == "generic:distributed_init"
    assert "in c10d::TCPStore::get (libtorch_cpu.so)" in state["context"]


def test_a_stack_whose_only_known_frame_is_the_training_scripts_is_the_training_loop():
    dump = ['Thread 1 (idle): "MainThread"',
            "    _run_local (experiments/moe/train.py:585)",
            "    <module> (_callable_runner.py:40)"]
    state = fed(["rank 0 quiet", *dump]).state()
    assert state["place"] == "generic:train_loop"
    assert state["context"].endswith("2 line(s) from the end: in _run_local "
                                     "(experiments/moe/train.py)")
    inner = ['Thread 1 (idle): "MainThread"',
             "    barrier (torch/distributed/distributed_c10d.py:3439)",
             "    main (train.py:22)"]
    assert fed(["rank 0 quiet", *inner]).state()["context"].startswith(
        "where it went quiet: collective, ")  # an inner frame a rule knows names it


def test_a_frameworks_own_loop_in_a_pasted_stack_names_training_or_evaluation():
    fit = ["    __to_tensor (pytorch_lightning/core/module.py:619)",
           "    log (pytorch_lightning/core/module.py:447)",
           "    training_step (nemo/collections/nlp/models/megatron_gpt_model.py:653)",
           "    _training_step (pytorch_lightning/loops/optimization/automatic.py:315)"]
    assert fed(["rank 0 quiet", *fit]).state()["place"] == "generic:train_loop"
    evaluating = ["    __to_tensor (lightning/pytorch/core/module.py:619)",
                  "    _evaluation_step (lightning/pytorch/loops/evaluation_loop.py:411)",
                  "    run (lightning/pytorch/loops/evaluation_loop.py:141)"]
    rules = load_rule_set()  # (read whole, evaluation_loop.py's name opens an evaluation)
    place = stack_place(evaluating, rules.stack_rules,
                        lambda phase_id: rules.phase(f"generic:{phase_id}"))
    assert place is not None and place.phase is not None
    assert place.phase.id == "generic:evaluation"


def test_a_dump_waiting_on_torchs_extension_lock_is_a_build():
    dump = ["Timeout (0:02:00)!", "Thread 0x00007f (most recent call first):",
            'File "/v/site-packages/torch/utils/file_baton.py", line 50 in wait',
            'File "/v/site-packages/torch/utils/cpp_extension.py", line 2156 in _jit_compile',
            'File "/w/tests/test_model.py", line 7 in <module>']
    state = fed(["collected 12 items", *dump]).state()
    assert state["place"] == "generic:build"
    assert "in wait (torch/utils/file_baton.py)" in state["context"]


def test_the_main_threads_stack_names_the_place_before_a_helper_threads_printed_after_it():
    dump = ['Thread 4121 (idle): "MainThread"',
            "    read (safetensors/torch.py:311)",
            "    main (train.py:22)",
            'Thread 4133 (idle): "comm_watchdog"',
            "    barrier (torch/distributed/distributed_c10d.py:3439)",
            "    run (threading.py:953)"]
    state = fed(["rank 0 quiet", *dump]).state()
    assert state["place"] == "generic:model_load"
    assert "in read (safetensors/torch.py)" in state["context"]
    helper_only = fed(["rank 0 quiet", *dump[3:]]).state()  # no main thread: the stack there is
    assert helper_only["context"].startswith("where it went quiet: collective, ")


def test_a_load_or_save_function_in_a_checkpoint_module_names_which_way_it_goes():
    assert place_of("    _load_base_checkpoint (megatron/training/checkpointing.py:712)",
                    "    setup_model_and_optimizer (megatron/training/training.py:720)"
                    ) == "generic:model_load"
    assert place_of("    dcp_save (trainer/checkpoints/writer.py:88)",
                    "    fit (trainer/loop.py:140)") == "generic:checkpoint_save"
    # a load in no checkpoint module names nothing
    assert place_of("    reload_batches (trainer/data/loader.py:12)",
                    "    main (tool.py:3)") is None


def test_a_main_thread_waiting_inside_its_own_exit_names_a_shutdown():
    # whatever it waits for inside (a gRPC channel, a join), the place is the exit
    assert place_of("    wait (threading.py:312)", "    __del__ (grpc/_channel.py:1247)",
                    "    disconnect (ray/_private/worker.py:2119)",
                    "    shutdown (ray/_private/worker.py:1581)") == "generic:shutdown"
    assert place_of("    join (threading.py:1096)", "    _shutdown (threading.py:1583)"
                    ) == "generic:shutdown"
    assert place_of("    join (multiprocessing/process.py:149)",
                    "    _exit_function (multiprocessing/util.py:357)") == "generic:shutdown"
    # a user's own `shutdown` outside the frameworks, or a join while training, is no exit
    assert place_of("    join (threading.py:1096)", "    shutdown (myapp/server.py:40)",
                    "    main (tool.py:3)") is None


def test_the_newer_of_a_stack_and_a_bar_names_the_silence():
    bar = "Scoring test set: 45%|####5 | 9/20 [00:03<00:04]"
    assert fed([*PY_SPY, bar]).state()["place"] == "generic:evaluation"
    assert fed([bar, *PY_SPY]).state()["place"] == "generic:model_load"


# --- between phases --------------------------------------------------------------------------

def test_nothing_open_after_a_packs_phase_names_the_next_one_it_declares():
    rules = RuleSet([*load_rule_set().packs, load_pack_text(PACK, "boot.yaml")])
    e = engine(rules)
    e.feed_line("log", "fetching env")
    e.feed_line("log", "env ready")
    state = e.state()
    assert state["phase"] is None
    assert state["between"] == ("after Fetching the environment (fetch_env), before Spawning "
                                "workers (spawn_workers), by the order of pack boot")


NCCL_INIT = ["host:17:90 [0] NCCL INFO comm 0x5ed0b2f0 rank 0 nranks 2 cudaDev 0 busId 1000 - "
             "Init START",
             "host:18:91 [1] NCCL INFO comm 0x6f4a1dd0 rank 1 nranks 2 cudaDev 1 busId 2000 - "
             "Init START",
             "host:17:90 [0] NCCL INFO comm 0x5ed0b2f0 rank 0 nranks 2 cudaDev 0 busId 1000 - "
             "Init COMPLETE",
             "host:18:91 [1] NCCL INFO comm 0x6f4a1dd0 rank 1 nranks 2 cudaDev 1 busId 2000 - "
             "Init COMPLETE"]


def test_a_job_silent_after_nccl_init_completes_is_placed_before_its_first_collective():
    e = engine()
    for line in NCCL_INIT:
        e.feed_line("log", line)
    state = e.state()
    assert state["phase"] is None
    assert state["between"].startswith("after NCCL communicator init (nccl_comm_init), before "
                                       "First NCCL collective (peers connect) "
                                       "(nccl_first_collective)")
    assert state["kind"] is None


@pytest.mark.parametrize("line", [
    "host:17:17 [0] NCCL INFO Launch mode Parallel",
    "host:17:17 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f2abfe00200 recvbuff "
    "0x7f2abfe00200 count 1 datatype 1 op 0 root 0 comm 0x5ed0b2f0 [nranks=2] stream 0xa5f5e20"])
def test_nccls_first_launch_after_init_opens_the_first_collective_a_distributed_init(line):
    e = engine()
    for text in [*NCCL_INIT, line]:
        e.feed_line("log", text)
    state = e.state()
    assert state["phase"] == "nccl_first_collective"
    assert state["kind"] == "distributed_init"
    e.feed_line("log", "host:17:17 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x1")
    assert e.state()["phase"] == "nccl_first_collective"  # a later collective opens nothing
    # NCCL 2.22+ connects its channels at the first collective: they are that collective's
    e.feed_line("log", "host:17:17 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read")
    assert e.state()["phase"] == "nccl_first_collective"


def test_past_a_packs_last_phase_the_usual_order_of_a_training_job_says_what_follows():
    rules = load_rule_set()
    weights = rules.phase("vllm_load_weights")
    assert weights is not None
    between = expected_next(rules.phase("vllm_serving") or weights, rules)
    assert between is not None and between.by == USUAL
    data_load = rules.phase("generic:data_load")
    assert data_load is not None
    after_data = expected_next(data_load, rules)
    assert after_data is not None and after_data.by == USUAL
    assert [r.id for r in after_data.before] == ["generic:model_load"]
    save = rules.phase("generic:checkpoint_save")
    assert save is not None
    after_save = expected_next(save, rules)  # the loop resumes after a save, or the job ends
    assert after_save is not None
    assert [r.id for r in after_save.before] == ["generic:train_loop", "generic:shutdown"]


def test_after_a_finish_line_what_is_between_is_the_shutdown():
    e = engine()
    for line in [" iteration       50/      50 | consumed samples:  9600 | lm loss: 2.804868E-01",
                 "[after training is done] datetime: 2025-11-24 21:52:53"]:
        e.feed_line("log", line)
    state = e.state()
    assert state["finished"] and state["phase"] is None
    assert state["between"] == ("after Megatron training iterations (megatron_train), before "
                                "Shutting down (generic:shutdown), by a job that says it "
                                "finished exits next")


@pytest.mark.parametrize(("line", "ended"), [
    ("Train epoch: 100%|##########| 10/10 [00:30<00:00,  3.00s/it]", True),
    ("Epoch 2/2: 100%|##########| 20/20 [00:03<00:00]", True),
    ("50/50 [==============================] - 3s 60ms/step", True),
    ("[########] 100.00%", True),
    ("Epoch 1/1: 45%|####5 | 9/20 [00:03<00:04]", False),  # the description's count is not it
    ("100%|#########9| 999/1000 [00:10<00:00]", False),  # tqdm's rounding: its count decides
    ("[####....] 54.35%", False),
    ("step 10/10 done", False),  # a counter, no bar
])
def test_a_bar_at_its_end_is_told_from_one_part_way(line: str, ended: bool):
    assert bar_at_end(line) is ended


def test_a_bar_at_its_end_then_silence_names_what_comes_after_its_loop_beside_the_phase():
    ended = fed(["Train epoch: 100%|##########| 10/10 [00:30<00:00,  3.00s/it]"]).state()
    assert ended["phase"] == "generic:train_loop"  # still open: no rule saw it end
    assert ended["between"].startswith("after Training loop (generic:train_loop), before "
                                       "Evaluation or validation (generic:evaluation) or ")
    assert ended["between"].endswith("; its bar reached the end")
    part_way = fed(["Train epoch:  40%|####      | 4/10 [00:12<00:18,  3.00s/it]"]).state()
    assert part_way["phase"] == "generic:train_loop" and part_way["between"] == ""
    # a bar no rule names, at its end: past the training loop it is taken for
    bare = fed(["rank 0 ready", "100%|##########| 50/50 [00:10<00:00,  4.90it/s]"]).state()
    assert bare["place"] is None and bare["between"].startswith(
        "after Training loop (generic:train_loop), before Evaluation or validation")


def test_a_phase_open_or_none_seen_names_nothing_between():
    e = engine()
    assert e.state()["between"] == ""
    e.feed_line("log", "Preparing the corpus")
    assert e.state()["between"] == ""


def test_a_phases_declared_kind_says_what_follows_it_and_is_the_kind_of_place_shown():
    pack = load_pack_text("""\
pack: fetcher
phases:
  - id: pull_shards
    title: Pulling shards
    kind: data_load
    start: 'pulling shards'
    done: 'shards pulled'
""", "fetcher.yaml")
    rules = RuleSet([*load_rule_set().packs, pack])
    pulling = rules.phase("pull_shards")
    assert pulling is not None
    after = expected_next(pulling, rules)  # its title alone names no kind of place
    assert after is not None and [r.id for r in after.before] == ["generic:model_load"]
    e = engine(rules)
    e.feed_line("log", "pulling shards")
    assert e.state()["kind"] == "data_load"
    e.feed_line("log", "shards pulled")
    assert e.state()["kind"] is None and e.state()["between"].startswith("after Pulling shards")


def test_many_lines_no_rule_names_after_the_last_phase_leave_nothing_between():
    rules = RuleSet([*load_rule_set().packs, load_pack_text(PACK, "boot.yaml")])
    e = engine(rules)
    e.feed_line("log", "fetching env")
    e.feed_line("log", "env ready")
    for i in range(BEFORE_LINES):
        e.feed_line("log", f"user output {i}")
    assert e.state()["between"].startswith("after Fetching the environment")
    e.feed_line("log", "one line more")  # the job went on past it: the guess is stale
    assert e.state()["between"] == ""


def test_a_line_saying_the_job_was_stopped_from_outside_is_found_as_the_search_finds_it():
    """`interrupted` searches a line of ASCII only where one of the words is: the same
    answers as the search, for the signal names in any case, Ctrl-C's spellings, and
    letters outside ASCII that fold to the words' (the long s, the Kelvin sign)."""
    import random

    words = ["SIGINT", "SIGTERM", "sigint", "SIGKILLx", "_SIGHUP", "SIGQUIT", "signal",
             "KeyboardInterrupt", "keyboardinterrupt", "ctrl-c", "CTRL C", "Ctrl+C", "ctrlc",
             "death signal", "DEATH SIGNAL", "death \u017fignal", "\u212a", "^C", "x^C",
             "Received", " ", "a", "\u00e9"]
    rng = random.Random(3)
    for _ in range(20000):
        line = "".join(rng.choice(words) + rng.choice(["", " ", "_", "\n"])
                       for _ in range(rng.randint(1, 4)))
        assert interrupted(line) == (INTERRUPTED.search(line) is not None), line
    assert interrupted("Received Signals.SIGINT death signal, shutting down workers")
    assert not interrupted("(WorkerDict pid=3002) [ROLLOUT] generate_sequences START")
