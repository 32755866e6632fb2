from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch.cli import main
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigErrors
from hangwatch.packs.load import load_pack_text, load_rule_set, load_user_packs


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigErrors) as info:
        load_pack_text(text, "mine.yaml")
    return [e.render() for e in info.value.errors]


def test_every_problem_is_reported_with_file_line_and_rule():
    messages = errors_of("""pack: mine
phases:
  - id: a
    start: 'foo('
    colour: red
  - id: a
    start: x
    stall_after: soon
signals:
  - id: s
    match: y
    severity: fatal
""")
    assert messages == [
        "mine.yaml:5: rule a: unknown key 'colour' in phases (known: advice, done, id, kind, "
        "nests, parent, stall_after, start, title)",
        "mine.yaml:4: rule a: bad regex in `start`: missing ) at position 4: 'foo('",
        "mine.yaml:6: rule a: duplicate id 'a' (first at line 3)",
        "mine.yaml:8: rule a: bad duration in `stall_after`: not a duration: 'soon' "
        "(use e.g. 90, 90s, 10m, 1h)",
        "mine.yaml:12: rule s: `severity` must be one of info, warning, error, not 'fatal'",
    ]


def test_yaml_syntax_error_names_the_line():
    [message] = errors_of("pack: x\nphases:\n  - id: a\n   start: [\n")
    assert message.startswith("mine.yaml:4: invalid YAML")


def test_duplicate_yaml_key_is_an_error():
    [message] = errors_of("pack: x\npack: y\n")
    assert message.startswith("mine.yaml:2: invalid YAML: duplicate key 'pack'")


def test_missing_pack_and_unknown_top_level_key():
    messages = errors_of("phasez: []\n")
    assert any("unknown key 'phasez'" in m for m in messages)
    assert any("`pack` must name the pack" in m for m in messages)


def test_pack_with_only_noise_is_valid():
    pack = load_pack_text("pack: quiet\nnoise:\n  - id: hb\n    match: heartbeat\n", "q.yaml")
    assert pack.rule_count()["noise"] == 1 and pack.phases == ()


def test_progress_rule_counter_must_name_a_group():
    [message] = errors_of("pack: x\nprogress:\n  - id: s\n    match: 'step \\d+'\n"
                          "    counter: n\n")
    assert "`counter: n` names no group" in message and message.startswith("mine.yaml:5")


def test_diagnosis_condition_values_are_checked():
    [message] = errors_of("pack: x\ndiagnoses:\n  - id: d\n    when: {gpus: hot}\n")
    assert "condition 'gpus' takes one of busy, idle" in message


def test_user_phase_with_existing_id_overrides_builtin(tmp_path: Path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("pack: mine\nphases:\n  - id: weight_sync\n    start: 'MY SYNC BEGIN'\n"
                    "    stall_after: 2m\n")
    rules = load_rule_set([mine])
    sync = rules.phase("weight_sync")
    assert sync is not None and sync.start == "MY SYNC BEGIN" and sync.stall_after == 120
    assert [p.id for p in rules.phases].count("weight_sync") == 1


def test_rules_folder_loads_every_yaml_file(tmp_path: Path):
    (tmp_path / "a.yaml").write_text("pack: a\nnoise:\n  - id: n1\n    match: x\n")
    (tmp_path / "b.yml").write_text("pack: b\nnoise:\n  - id: n2\n    match: y\n")
    (tmp_path / "notes.txt").write_text("not a pack")
    assert [p.name for p in load_user_packs([tmp_path])] == ["a", "b"]


def test_duplicate_id_between_builtin_packs_is_an_error():
    a = load_pack_text("pack: a\nnoise:\n  - id: same\n    match: x\n", "a.yaml", builtin=True)
    b = load_pack_text("pack: b\nnoise:\n  - id: same\n    match: y\n", "b.yaml", builtin=True)
    with pytest.raises(ConfigErrors, match=r"b\.yaml:3: rule same: duplicate id 'same'"):
        RuleSet([a, b])


def test_builtin_pack_that_extends_another_may_override():
    a = load_pack_text("pack: a\nnoise:\n  - id: same\n    match: x\n", "a.yaml", builtin=True)
    b = load_pack_text("pack: b\nextends: [a]\nnoise:\n  - id: same\n    match: y\n", "b.yaml",
                       builtin=True)
    assert [n.match for n in RuleSet([a, b]).noise] == ["y"]


def test_extending_an_unknown_pack_is_an_error():
    b = load_pack_text("pack: b\nextends: [nope]\n", "b.yaml")
    with pytest.raises(ConfigErrors, match="extends unknown pack 'nope'"):
        RuleSet([b])


@pytest.mark.parametrize(("text", "expected"), [
    ("pack: bad\nsignals:\n  - id: x\n    match: '(unclosed'\n",
     "4: rule x: bad regex in `match`"),
    # one item of a list of alternatives: its own line
    ("pack: bad\nnoise:\n  - id: n\n    match:\n      - x\n      - '[z'\n",
     "6: rule n: bad regex in `match` (item 2)"),
])
def test_bad_rule_file_exits_2_with_a_message_naming_file_and_line(
        tmp_path: Path, capsys, text: str, expected: str):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    log = tmp_path / "train.log"
    log.write_text("hello\n")
    assert main(["check", str(log), "--rules", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{expected}" in err and "Traceback" not in err


def test_missing_rules_path_is_a_usage_error(tmp_path: Path, capsys):
    log = tmp_path / "train.log"
    log.write_text("hello\n")
    assert main(["check", str(log), "--rules", str(tmp_path / "nope.yaml")]) == 2
    assert "no such rule file or folder" in capsys.readouterr().err


# --- a pattern as a list of alternatives ------------------------------------------------------


def test_a_list_of_alternatives_is_one_pattern_each_keeping_its_own_flags():
    pack = load_pack_text("""pack: mine
phases:
  - id: loading
    start:
      - '(?i)\\bloading (?:the )?model\\b'
      - 'Restoring weights'
    done: ['model ready']
signals:
  - id: slow
    match:
      - 'straggler'
noise:
  - id: probe
    match: [ '"GET /health' ]
""", "mine.yaml")
    [phase] = pack.phases
    assert isinstance(phase.start, str) and phase.done == "(?:model ready)"
    rules = RuleSet([pack])
    hits = {text: rules.match(text) for text in
            ("LOADING THE MODEL", "Restoring weights", "restoring weights", "a straggler")}
    assert [m.phase_starts[0].id for m in (hits["LOADING THE MODEL"],
                                           hits["Restoring weights"])] == ["loading"] * 2
    # (?i) of the first item holds in that item only: the second stays case-sensitive.
    assert hits["restoring weights"] is None
    assert [s.id for s in hits["a straggler"].signals] == ["slow"]
    assert rules.match("model ready").phase_dones[0].id == "loading"
    assert rules.match('"GET /health HTTP/1.1" 200').noise is not None


def test_an_empty_list_of_alternatives_is_an_error_on_its_key_line():
    assert errors_of("pack: mine\nphases:\n  - id: a\n    start: []\n") == [
        "mine.yaml:4: rule a: `start` must be a regular expression (text) or a non-empty list "
        "of them"]


def test_an_item_that_is_not_text_is_named_with_its_own_line():
    assert errors_of("pack: mine\nsignals:\n  - id: s\n    match:\n      - ok\n"
                     "      - 42\n") == [
        "mine.yaml:6: rule s: item 2 of `match` must be a regular expression (text), not 42"]


def test_a_bad_regex_in_the_third_item_names_that_items_line():
    assert errors_of("""pack: mine
phases:
  - id: a
    title: A
    start:
      - 'first'
      - >-
        second, folded
        over two lines
      - 'third('
      - 'fourth'
""") == ["mine.yaml:10: rule a: bad regex in `start` (item 3): missing ) at position 6: "
         "'third('"]




# --- stacks: frame patterns -> places ---------------------------------------------------------

MY_STACKS = """\
pack: mine
stacks:
  - id: my_loader
    match: '^fetch_shard \\(mytrainer/data\\.py\\)'
    phase: data_load
    label: reading a shard
"""


def test_a_packs_stacks_rules_are_tried_before_the_generic_layers(tmp_path: Path):
    (tmp_path / "mine.yaml").write_text(MY_STACKS + """\
  - id: my_collective
    match: '^all_reduce \\('
    phase: collective
    label: my all-reduce
""")
    rules = load_rule_set([tmp_path / "mine.yaml"])
    ids = [r.id for r in rules.stack_rules]
    assert ids[:2] == ["my_loader", "my_collective"]
    assert "torch_collective" in ids[2:]  # the generic layer's follow
    from hangwatch.core.stackrules import rule_for

    hit = rule_for("all_reduce (torch/distributed/distributed_c10d.py)", rules.stack_rules)
    assert hit is not None and hit.label == "my all-reduce"


def test_bad_stacks_rules_are_reported_with_file_line_and_rule():
    messages = errors_of("""pack: mine
stacks:
  - id: a
    match: 'x('
    label: words
  - id: b
    match: y
    phase: Not-An-Id
    colour: red
""")
    assert messages == [
        "mine.yaml:4: rule a: bad regex in `match`: missing ), unterminated subpattern at "
        "position 1: 'x('",
        "mine.yaml:9: rule b: unknown key 'colour' in stacks (known: guess, id, label, match, "
        "phase)",
        "mine.yaml:6: rule b: missing required key 'label' in stacks",
        "mine.yaml:8: rule b: `phase` must be a phase id (lower case, e.g. data_load)",
    ]


def test_stacks_that_is_not_a_list_names_its_line():
    assert errors_of("pack: mine\nstacks: {id: a}\n") == [
        "mine.yaml:2: `stacks` must be a list of rules (id, match, label, phase)"]


def test_a_phase_declares_its_kind_of_place_and_a_wrong_kind_is_named_with_its_line():
    pack = load_pack_text("""\
pack: mine
phases:
  - id: warm
    kind: build
    start: 'warming up'
""", "mine.yaml")
    assert pack.phases[0].kind == "build"
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text("""\
pack: mine
phases:
  - id: warm
    kind: warming
    start: 'warming up'
""", "mine.yaml")
    assert "mine.yaml:4: rule warm: `kind` must be one of resource_wait, data_load" in \
        str(caught.value)


def test_a_signal_declares_its_kind_of_trouble_and_a_wrong_kind_is_named_with_its_line():
    pack = load_pack_text("""\
pack: mine
signals:
  - id: rpc_stuck
    kind: timeout
    match: 'RPC .* timed out'
""", "mine.yaml")
    assert pack.signals[0].kind == "timeout"
    with pytest.raises(ConfigErrors) as caught:
        load_pack_text("""\
pack: mine
signals:
  - id: rpc_stuck
    kind: phase
    match: 'RPC .* timed out'
""", "mine.yaml")
    assert "mine.yaml:4: rule rpc_stuck: `kind` must be one of stall_warning, timeout" in \
        str(caught.value)


def test_a_generic_signal_is_its_own_kind_and_a_pack_signal_of_none_has_none():
    rules = load_rule_set()
    timeout, traceback = rules.signal("generic:timeout"), rules.signal("python_traceback")
    assert timeout is not None and timeout.kind == "timeout"
    assert traceback is not None and traceback.kind is None


def test_a_generic_phase_named_after_a_kind_is_that_kind_and_another_declares_its_own():
    rules = load_rule_set()
    loop, serving = rules.phase("generic:train_loop"), rules.phase("generic:serving")
    assert loop is not None and loop.kind == "train_loop"
    # a server's requests are its main loop, as the training loop is a trainer's
    assert serving is not None and serving.kind == "train_loop"
    with pytest.raises(ConfigErrors) as err:
        load_pack_text("pack: g\nlayer: generic\nphases:\n  - id: warm\n    start: 'x'\n"
                       "    kind: warming\n", "g.yaml")
    assert "g.yaml:6: rule warm: `kind` must be one of resource_wait" in str(err.value)
