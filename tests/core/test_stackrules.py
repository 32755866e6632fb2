"""`stacks:` rules: validated with their place, matched against normalised frames."""

from __future__ import annotations

from hangwatch.core.stackrules import parse_stack_rules, rule_for
from hangwatch.storage.yamlfile import parse_yaml

GOOD = """\
stacks:
  - id: loader
    match: '\\(torch/utils/data/'
    phase: data_load
    label: data loading
"""
BAD = """\
stacks:
  - id: loader
    match: '(unclosed'
    label: data loading
  - id: loader
    match: 'x'
    label: ''
    colour: red
  - match: y
    phase: Not-An-Id
"""


def parse(text: str):
    doc = parse_yaml(text, "my.yaml")
    return parse_stack_rules(doc["stacks"], "my.yaml", doc.key_lines["stacks"])


def test_a_rule_matches_frames_by_function_and_file():
    [rule], errors = parse(GOOD)
    assert errors == [] and (rule.phase, rule.label, rule.line) == ("data_load", "data loading", 2)
    assert rule_for("__next__ (torch/utils/data/dataloader.py)", [rule]) is rule
    assert rule_for("all_reduce (torch/distributed/distributed_c10d.py)", [rule]) is None


def test_every_problem_is_reported_with_file_and_line():
    rules, errors = parse(BAD)
    assert rules == []
    shown = [e.render() for e in errors]
    assert any(s.startswith("my.yaml:3: rule loader: bad regex in `match`") for s in shown)
    assert any(s.startswith("my.yaml:5: rule loader: duplicate id 'loader'") for s in shown)
    assert any(s.startswith("my.yaml:7: rule loader: `label` must be") for s in shown)
    assert any(s.startswith("my.yaml:8: rule loader: unknown key 'colour'") for s in shown)
    assert any("missing required key 'id'" in s for s in shown)
    assert any("missing required key 'label'" in s and s.startswith("my.yaml:9:") for s in shown)
    assert any(s.startswith("my.yaml:10: ") and "`phase` must be" in s for s in shown)


def test_stacks_that_is_not_a_list_is_refused():
    _, [error] = parse_stack_rules({"id": "x"}, "my.yaml", 4)
    assert error.render().startswith("my.yaml:4: `stacks` must be a list")


def test_a_rule_may_say_it_guesses_and_anything_but_true_or_false_is_refused():
    [rule], errors = parse(GOOD + "    guess: true\n")
    assert errors == [] and rule.guess
    [plain], _ = parse(GOOD)
    assert not plain.guess
    _, [error] = parse(GOOD + "    guess: sometimes\n")
    assert error.render().startswith("my.yaml:6: rule loader: `guess` must be true or false")
