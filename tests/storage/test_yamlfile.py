"""YAML read with lines: mappings, keys and list items know where they were written."""

from __future__ import annotations

from hangwatch.storage.yamlfile import parse_yaml


def test_a_mapping_knows_the_lines_of_its_keys_and_of_each_item_of_a_list():
    doc = parse_yaml("phases:\n  - id: a\n    start:\n      - one\n\n      - two\n"
                     "    title: A\n", "p.yaml")
    rule = doc["phases"][0]
    assert (rule.line, rule.key_lines["start"], rule.key_lines["title"]) == (2, 3, 7)
    assert rule.item_lines == {"start": [4, 6]}
    assert doc.item_lines == {"phases": [2]}
