"""The package's shape in figures: lines per package, the longest functions, the biggest classes and modules, and
how much of the package and of its run analysis reads untyped dicts.

    python benchmarks/code_shape.py                 # the working tree
    python benchmarks/code_shape.py --rev 0c14720   # a commit (read with git show, nothing checked out)

Issue 30's before/after tables come from this script: run it at the parent commit and at the change.
Lines are physical lines of `.py` files (blank lines and comments included, as `wc -l` counts them).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from collections import Counter
from pathlib import Path

PACKAGE = "harnessrl"
# the run analysis: where the bench's results, tables and plots live (bench/ before the typed run record, bench/
# and analysis/ after), and the record they read
ANALYSIS = ("bench", "analysis")
PATTERNS = {
    "dict[str, Any]": re.compile(r"dict\[str, Any\]"),
    "isinstance": re.compile(r"\bisinstance\("),
    ".get(": re.compile(r"\.get\("),
}


def _sources(repo: Path, rev: str | None) -> dict[str, str]:
    """Every `.py` file of the package, path relative to the repository -> text."""
    if rev is None:
        return {str(p.relative_to(repo)): p.read_text() for p in sorted((repo / PACKAGE).rglob("*.py"))}
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", rev, PACKAGE],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {
        n: subprocess.run(
            ["git", "-C", str(repo), "show", f"{rev}:{n}"], check=True, capture_output=True, text=True
        ).stdout
        for n in names
        if n.endswith(".py")
    }


def _package(path: str) -> str:
    parts = path.split("/")
    return parts[1] if len(parts) > 2 else "(top level)"


def _functions(path: str, text: str) -> list[tuple[int, str]]:
    """(lines, module:qualified name) of every function and method."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((child.end_lineno - child.lineno + 1, f"{path.removeprefix(PACKAGE + '/')}:{name}"))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(text), "")
    return out


def _classes(path: str, text: str) -> list[tuple[int, str]]:
    """(lines, module:name) of every class, nested ones too."""
    short = path.removeprefix(PACKAGE + "/")
    nodes = (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef))
    return [(n.end_lineno - n.lineno + 1, f"{short}:{n.name}") for n in nodes]


def shape(repo: Path, rev: str | None) -> str:
    sources = _sources(repo, rev)
    lines = {p: t.count("\n") for p, t in sources.items()}
    per_package = Counter()
    for p, n in lines.items():
        per_package[_package(p)] += n
    total = sum(lines.values())
    functions = sorted((f for p, t in sources.items() for f in _functions(p, t)), reverse=True)
    out = [
        f"## {PACKAGE} at {rev or 'the working tree'}",
        "",
        f"{total:,} lines in {len(sources)} modules.",
        "",
        "| package | lines | share |",
        "|---|---:|---:|",
    ]
    out += [f"| {k} | {v:,} | {v / total:.1%} |" for k, v in sorted(per_package.items(), key=lambda kv: -kv[1])]
    out += ["", "Ten longest functions:", "", "| function | lines |", "|---|---:|"]
    out += [f"| `{name}` | {n} |" for n, name in functions[:10]]
    classes = sorted((c for p, t in sources.items() for c in _classes(p, t)), reverse=True)
    out += ["", "Five biggest classes:", "", "| class | lines |", "|---|---:|"]
    out += [f"| `{name}` | {n} |" for n, name in classes[:5]]
    out += ["", "Ten biggest modules:", "", "| module | lines |", "|---|---:|"]
    biggest = sorted(lines.items(), key=lambda kv: -kv[1])[:10]
    out += [f"| `{p.removeprefix(PACKAGE + '/')}` | {n:,} |" for p, n in biggest]
    out += ["", "Across the package:", "", "| pattern | count |", "|---|---:|"]
    out += [f"| `{k}` | {sum(len(rx.findall(t)) for t in sources.values())} |" for k, rx in PATTERNS.items()]
    analysis = {p: t for p, t in sources.items() if _package(p) in ANALYSIS}
    out += [
        "",
        f"The run analysis ({', '.join(ANALYSIS)}; {sum(lines[p] for p in analysis):,} lines):",
        "",
        "| pattern | count |",
        "|---|---:|",
    ]
    out += [f"| `{k}` | {sum(len(rx.findall(t)) for t in analysis.values())} |" for k, rx in PATTERNS.items()]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=None, help="a git commit to measure instead of the working tree")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    print(shape(args.repo, args.rev))


if __name__ == "__main__":
    main()
