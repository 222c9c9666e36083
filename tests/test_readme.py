"""The README is a guide of at most 300 lines, in a fixed order, and every link in it and in docs/ resolves (a file,
and a heading where the link names one): a section moved out of the README leaves no link pointing at it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import harnessrl

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _headings(path: Path) -> list[str]:
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            out.append(line.lstrip("#").strip())
    return out


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_readme_is_a_guide_of_at_most_300_lines_in_its_order():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail to docs/"
    sections = [h for h in _headings(README) if h != "HarnessRL"]
    assert sections == [
        "Set-up: two commands",
        "Quick start",
        "The harness from your own TRL script",
        "The loop",
        "Results",
        "Where to go next",
    ]
    text = "\n".join(lines)
    assert "make demo" in text and "make test" in text and "```mermaid" in text


def test_the_readmes_trl_snippet_parses_and_uses_the_public_api():
    code = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    tree = ast.parse(code)
    used = {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and getattr(n.value, "id", "") == "harnessrl"
    }
    assert used and used <= set(harnessrl.__all__), used - set(harnessrl.__all__)
    assert len(code.splitlines()) <= 16  # about ten lines


def test_every_link_in_the_readme_and_docs_resolves():
    pages = [
        README,
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "benchmarks" / "results").glob("*/README.md")),
    ]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)} -> {target}"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in {_anchor(h) for h in _headings(dest)}:
                broken.append(f"{where}: no such heading")
    assert broken == [], "\n".join(broken)
