"""YAML files read safely, with the line of every mapping, key and list item kept for error
messages.

Used for rule packs, the service's config file and alert targets: a bad file is answered
with `file:line` and what is wrong, and a file from anywhere cannot make loading slow or big.
"""

from __future__ import annotations

from typing import Any

import yaml

from hangwatch.errors import ConfigError, ConfigErrors

MAX_VALUES = 100_000  # scalars, lists and mappings, counting each alias as what it repeats


class YamlMapping(dict[Any, Any]):
    """A YAML mapping that remembers the line of itself, of each key and, for a key whose
    value is a list, of each item of it."""

    line: int = 0
    key_lines: dict[str, int]
    item_lines: dict[str, list[int]]


# libyaml's parser, where PyYAML was built with it, reads the packs about 4x faster.
_SafeLoader = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class _LineLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> YamlMapping:
        mapping = YamlMapping()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        mapping.item_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
            mapping.key_lines[str(key)] = key_node.start_mark.line + 1
            if isinstance(value_node, yaml.SequenceNode):
                mapping.item_lines[str(key)] = [n.start_mark.line + 1 for n in value_node.value]
        return mapping


_LineLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping
)


def parse_yaml(text: str, name: str) -> Any:
    """YAML whose mappings are YamlMappings (they know their lines); a syntax error or a
    duplicate key raises ConfigErrors naming `name` and the line."""
    try:
        doc = yaml.load(text, Loader=_LineLoader)  # safe: a SafeLoader with line numbers
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else 0
        raise ConfigErrors(
            [ConfigError(f"invalid YAML: {exc.problem or exc}", file=name, line=line)]
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigErrors([ConfigError(f"invalid YAML: {exc}", file=name)]) from None
    _refuse_alias_bomb(doc, name)
    return doc



def _refuse_alias_bomb(doc: Any, name: str) -> None:
    """Aliases make a small file stand for a huge document ("billion laughs"). The loader
    shares what an alias repeats, so loading is cheap; anything that walked the document
    (validation, error messages) would not be. Count values as a walk would see them, and
    stop at MAX_VALUES."""
    budget = [MAX_VALUES]

    def walk(value: Any) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError
        if isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    top = doc.items() if isinstance(doc, YamlMapping) else [("", doc)]
    for key, value in top:
        try:
            walk(value)
        except (OverflowError, RecursionError):
            line = doc.key_lines.get(str(key), 1) if isinstance(doc, YamlMapping) else 1
            raise ConfigErrors([ConfigError(
                f"`{key}` expands to more than {MAX_VALUES} values through YAML aliases "
                f"(*name): refused", file=name, line=line)]) from None
