"""Configuration files and the settings they hold.

Reading: YAML with errors that name the file, the line and the fix, and ``key.sub=value`` overrides.
Describing: every settings model documents each field where it is declared (``Field(description=...)``, as TRL's
``GRPOConfig`` does in its ``help`` metadata); :func:`settings_reference` renders a model and every model it nests
as one Markdown page (``harnessrl config docs`` writes docs/configuration.md from it), and
:func:`resolved_settings` says where each value of a loaded config came from (``harnessrl config show``).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
import yaml
from pydantic import BaseModel, JsonValue
from pydantic.fields import FieldInfo

from harnessrl.errors import ConfigError

__all__ = [
    "DEFAULT",
    "DERIVED",
    "ConfigMapping",
    "ResolvedSetting",
    "SettingDoc",
    "SettingsSection",
    "api_key_from_env",
    "apply_overrides",
    "is_loopback_url",
    "load_yaml",
    "resolved_settings",
    "settings_reference",
    "settings_sections",
    "undescribed_settings",
    "yaml_text",
]

ConfigMapping = dict[str, JsonValue]
"""A config file's settings as YAML reads them: sections as nested mappings, values as YAML wrote them; what
``key.sub=value`` overrides set, before a settings model validates it."""

LOCAL_SERVER_KEY = "EMPTY"  # what vLLM and most local OpenAI-compatible servers accept when they check no key


def is_loopback_url(url: str | None) -> bool:
    """Whether ``url`` points at this machine (localhost, 127.0.0.1, ::1)."""
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower() if url else ""
    return host in ("localhost", "127.0.0.1", "::1") or host.endswith(".localhost")


def api_key_from_env(env_var: str, base_url: str | None, setting: str, error: type[Exception] = ConfigError) -> str:
    """The API key in ``env_var``; a placeholder for a server on loopback; else ``error`` saying what to set.

    ``setting`` names the config key that chooses the variable (e.g. ``judge.api_key_env``)."""
    import os

    key = os.environ.get(env_var) or None
    if key is not None:
        return key
    if is_loopback_url(base_url):
        return LOCAL_SERVER_KEY
    where = base_url or "the OpenAI API"
    raise error(
        f"{where} needs an API key: set the environment variable {env_var} "
        f"(or point {setting} at the variable that holds it)"
    )


def load_yaml(path: str | Path) -> ConfigMapping:
    """A YAML mapping from ``path``; raises :class:`ConfigError` for a missing, broken or non-mapping file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file (see configs/ for examples)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings, got {type(data).__name__}")
    return data


def apply_overrides(data: ConfigMapping, overrides: ConfigMapping) -> ConfigMapping:
    """``data`` with each ``key.sub -> value`` set; a mapping value is merged into an existing section."""
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        keys = dotted.split(".")
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted!r}: {k!r} is not a section of the config")
        last = keys[-1]
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = apply_overrides(node[last], {k: v for k, v in value.items()})
        else:
            node[last] = copy.deepcopy(value)
    return out


# ------------------------------------------------------------------------------------ describing settings
@dataclass(frozen=True)
class SettingDoc:
    """One field of a settings model, as the reference page shows it."""

    key: str  # the dotted key a config file or ``-s`` sets, e.g. ``evolver.trials.max_looks``
    type: str
    default: str  # as YAML writes it; "" for a section (its fields have their own)
    description: str
    section: str | None = None  # the key of the section this field opens, when it holds a settings model


@dataclass(frozen=True)
class SettingsSection:
    """The fields of one settings model at one place of the config (``grpo``, ``evolver.trials``; ``""``: the top)."""

    key: str
    model: type[BaseModel]
    settings: list[SettingDoc]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The settings models an annotation holds (``X``, ``X | None``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _type_text(annotation: Any) -> str:
    """A field's type in the words of a YAML file: ``int``, ``one of auto, cpu, cuda``, ``float or null``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args)
    if origin in (list, tuple, set, Sequence):
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin in (dict, Mapping):
        return f"mapping of {_type_text(args[0])} to {_type_text(args[1])}" if args else "mapping"
    if annotation is Any or annotation is JsonValue:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = (
    (annotated_types.Ge, "≥", "ge"),
    (annotated_types.Gt, ">", "gt"),
    (annotated_types.Le, "≤", "le"),
    (annotated_types.Lt, "<", "lt"),
)


def _bounds_text(info: FieldInfo) -> str:
    """The field's numeric bounds, e.g. `` ≥ 1`` or `` > 0, ≤ 1``."""
    shown = [f"{sign} {getattr(m, attr)}" for m in info.metadata for kind, sign, attr in _BOUNDS if isinstance(m, kind)]
    return (" " + ", ".join(shown)) if shown else ""


def yaml_text(value: Any) -> str:
    """A value as a YAML file writes it: ``null``, ``true``, ``5e-06``, ``[a, b]``, ``{k: v}``."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str | Path):
        return str(value) if str(value) else "''"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, default=str, ensure_ascii=False)


def _default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "(required)"
    default = info.get_default(call_default_factory=True)
    return "" if isinstance(default, BaseModel) else yaml_text(default)


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def settings_sections(model: type[BaseModel], key: str = "") -> list[SettingsSection]:
    """Every settings model under ``model``, one section per place it is set (depth first, in field order). A model
    met again at another place (the eval judge is a judge) is not repeated: its field points at the first one."""
    sections: list[SettingsSection] = []
    first_key: dict[type[BaseModel], str] = {}

    def walk(m: type[BaseModel], at: str) -> None:
        first_key[m] = at
        rows, nested = [], []
        for name, info in m.model_fields.items():
            sub_key = f"{at}.{name}" if at else name
            subs = _models_in(info.annotation)
            section = None
            if subs:
                section = first_key.get(subs[0], sub_key)
                if subs[0] not in first_key:
                    nested.append((subs[0], sub_key))
                    first_key[subs[0]] = sub_key
            type_text = _type_text(info.annotation) + _bounds_text(info)
            rows.append(SettingDoc(sub_key, type_text, _default_text(info), _one_line(info.description), section))
        sections.append(SettingsSection(at, m, rows))
        for sub, sub_key in nested:
            walk(sub, sub_key)

    walk(model, key)
    return sections


def undescribed_settings(model: type[BaseModel]) -> list[str]:
    """The dotted keys of every field under ``model`` that has no description (each must say what it does)."""
    return [s.key for section in settings_sections(model) for s in section.settings if not s.description]


def _docstring_text(model: type[BaseModel]) -> str:
    """A model's docstring as Markdown paragraphs (reST's double backticks and roles made plain)."""
    doc = inspect.cleandoc(model.__doc__ or "")
    doc = re.sub(r":\w+:`~?([^`]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", doc)
    doc = doc.replace("``", "`")
    paragraphs = []
    for paragraph in doc.split("\n\n"):
        items: list[str] = []  # prose, or the items of a bullet list, each on its line
        for line in paragraph.splitlines():
            if line.lstrip().startswith("- ") or not items:
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        paragraphs.append("\n".join(" ".join(item.split()) for item in items if item))
    return "\n\n".join(p for p in paragraphs if p)


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_reference(parts: Sequence[tuple[str, str, type[BaseModel]]], preamble: str = "") -> str:
    """One Markdown page documenting every field of each ``(title, intro, model)`` part: a table per section
    (setting, type, default, description), sections in the order a config nests them."""
    out = [preamble.rstrip() + "\n"] if preamble else []
    for title, intro, model in parts:
        out.append(f"## {title}\n")
        if intro:
            out.append(intro.rstrip() + "\n")
        sections = settings_sections(model)
        headings = {s.key: f"`{s.key}.`" if s.key else f"{title}: top level" for s in sections}
        out.append("Sections: " + ", ".join(f"[{headings[s.key]}](#{_anchor(headings[s.key])})" for s in sections))
        out.append("")
        for section in sections:
            out.append(f"### {headings[section.key]}\n")
            doc = _docstring_text(section.model)
            if doc:
                out.append(doc + "\n")
            out.append("| setting | type | default | description |")
            out.append("|---|---|---|---|")
            for s in section.settings:
                name = s.key.rsplit(".", 1)[-1]
                described = s.description
                if s.section is not None:
                    link = f"[`{s.section}.`](#{_anchor(headings[s.section])})"
                    described += f" Settings: {link}." if s.section == s.key else f" The settings of {link}."
                default = f"`{_cell(s.default)}`" if s.section is None else "—"
                out.append(f"| `{name}` | {_cell(s.type)} | {default} | {_cell(described)} |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------------------ where a value came from
DEFAULT = "default"
DERIVED = "derived"
"""The source of a value no file or ``-s`` set that a validator computed from another setting (e.g. ``method``)."""


@dataclass(frozen=True)
class ResolvedSetting:
    """One value of a loaded config and where it came from: ``default``, the file's path, the ``-s key=value``
    that set it, or ``derived`` (computed from another setting)."""

    key: str
    value: Any
    source: str


def _at(tree: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        if not isinstance(tree, Mapping):
            return None
        tree = tree.get(part)
    return tree


def _mark(marks: dict[tuple[str, ...], tuple[int, str]], key: tuple[str, ...], value: Any, mark: tuple[int, str]):
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            _mark(marks, key + tuple(str(k).split(".")), v, mark)
    else:
        marks[key] = mark


def _mark_override(marks, key: tuple[str, ...], value: Any, existing: Any, mark: tuple[int, str]) -> None:
    """Record what one override sets, as :func:`apply_overrides` applies it: a mapping merges into a mapping
    already there (what it leaves out keeps its source); anything else replaces the whole key."""
    if isinstance(value, Mapping) and isinstance(existing, Mapping):
        for k, v in value.items():
            parts = tuple(str(k).split("."))
            _mark_override(marks, key + parts, v, _at(existing, parts), mark)
        return
    for old in [p for p in marks if p[: len(key)] == key]:
        del marks[old]
    _mark(marks, key, value, mark)


def resolved_settings(
    settings: BaseModel,
    file_data: Mapping[str, Any],
    overrides: Sequence[tuple[str, Any, str]] = (),
    file_label: str = "file",
) -> list[ResolvedSetting]:
    """Every value of ``settings`` (a validated model) with its source.

    Args:
        settings: the validated settings.
        file_data: the mapping the config file held (``{}`` without a file).
        overrides: each ``-s`` in the order given: (dotted key, parsed value, the ``key=value`` as written).
        file_label: how the file is named in the sources (its path).
    """
    marks: dict[tuple[str, ...], tuple[int, str]] = {}
    if file_data:
        _mark(marks, (), dict(file_data), (0, file_label))
    data: ConfigMapping = copy.deepcopy(dict(file_data))
    for i, (key, value, written) in enumerate(overrides, start=1):
        parts = tuple(key.split("."))
        _mark_override(marks, parts, value, _at(data, parts), (i, f"-s {written}"))
        data = apply_overrides(data, {key: value})
    out: list[ResolvedSetting] = []

    def walk(model: BaseModel, at: tuple[str, ...]) -> None:
        for name, info in type(model).model_fields.items():
            value, key = getattr(model, name), (*at, name)
            if isinstance(value, BaseModel):
                walk(value, key)
                continue
            given = [m for p, m in marks.items() if p[: len(key)] == key]
            if given:
                source = max(given)[1]
            else:
                source = DEFAULT if value == info.get_default(call_default_factory=True) else DERIVED
            out.append(ResolvedSetting(".".join(key), value, source))

    walk(settings, ())
    return out
