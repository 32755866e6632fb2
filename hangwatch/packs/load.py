"""Rule packs from files: the built-in ones shipped in the wheel and the user's `--rules`,
every file's errors collected before any is raised."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hangwatch.core.model import RulePack
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigError, ConfigErrors
from hangwatch.packs.parse import parse_pack

MAX_FILE_BYTES = 1 << 20


def builtin_rules_dir() -> Path:
    """The packs shipped inside the wheel, else the checkout's top-level rules/ (source runs)."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "rules", package.parent / "rules"):
        if candidate.is_dir():
            return candidate
    return package / "rules"


def rule_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not path.exists():
        raise ConfigError("no such rule file or folder", file=str(path))
    return [path]


def load_builtin_packs() -> list[RulePack]:
    return [load_pack_file(p, builtin=True) for p in rule_files(builtin_rules_dir())]


def load_pack_file(path: Path, *, builtin: bool = False) -> RulePack:
    """Parse and validate one file; raise ConfigErrors listing every problem in it."""
    name = str(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigErrors([ConfigError(f"cannot read: {exc}", file=name)]) from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigErrors([ConfigError(f"larger than {MAX_FILE_BYTES // 1024} KiB: not a rule "
                                        f"pack", file=name)])
    return load_pack_text(text, name, builtin=builtin)


def load_pack_text(text: str, name: str, *, builtin: bool = False) -> RulePack:
    return parse_pack(text, name, builtin)[0]


def load_user_packs(paths: Iterable[Path]) -> list[RulePack]:
    """Load `--rules` files and folders, collecting the errors of all files before raising."""
    packs: list[RulePack] = []
    errors: list[ConfigError] = []
    for path in paths:
        try:
            files = rule_files(path)
        except ConfigError as exc:
            errors.append(exc)
            continue
        for file in files:
            try:
                packs.append(load_pack_file(file))
            except ConfigErrors as exc:
                errors.extend(exc.errors)
    if errors:
        raise ConfigErrors(errors)
    return packs


def load_rule_set(extra: Iterable[str | Path] = ()) -> RuleSet:
    """The built-in packs plus the user's `--rules` files and folders, merged and compiled."""
    return RuleSet([*load_builtin_packs(), *load_user_packs(Path(p) for p in extra)])
