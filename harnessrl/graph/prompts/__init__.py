"""The evolver's prompt texts, one editable Markdown file per prompt, read when a node runs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from harnessrl.errors import ConfigError

__all__ = ["load_prompt"]


def load_prompt(name: str, prompts_dir: str | Path | None = None, **values: object) -> str:
    """The prompt ``name`` (``name.md``), from ``prompts_dir`` when it has the file, else the packaged one.

    ``{key}`` placeholders are filled from ``values``; every other brace is left alone, so a prompt may
    show JSON examples without escaping them.
    """
    text = None
    if prompts_dir is not None:
        path = Path(prompts_dir) / f"{name}.md"
        if path.is_file():
            text = path.read_text(encoding="utf-8")
    if text is None:
        try:
            text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"no prompt {name!r}: expected {name}.md in harnessrl/graph/prompts/") from None
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text.strip()
