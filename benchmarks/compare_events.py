"""Compare two runs' decision traces (events.jsonl): same decisions, or where they differ.

    python benchmarks/compare_events.py RUN_A RUN_B [--ignore-kinds outcome,...]

Candidate ids are random per run, so they are renamed in order of appearance (c1, c2, ...); times,
durations and the tool server's url are dropped. Prints one line per event kind and every event that
still differs, with the fields that differ.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

_VOLATILE = {"time", "seconds", "wall_seconds", "trial_seconds", "url", "iterations"}
_CID = re.compile(r"\bc\d+-[0-9a-f]{8}\b")


def _load(run: Path) -> list[dict]:
    path = run / "events.jsonl"
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read the events ({e})") from None


def _normalise(events: list[dict]) -> list[dict]:
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        return names.setdefault(m.group(0), f"c{len(names) + 1}")

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in _VOLATILE}
        if isinstance(x, list):
            return [clean(v) for v in x]
        if isinstance(x, str):
            return _CID.sub(rename, x)
        return x

    return [clean(e) for e in events]


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from _diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _diff(x, y, f"{path}[{i}]")
    elif a != b:
        yield path, a, b


def main(argv: list[str]) -> int:
    ignore: set[str] = set()
    if "--ignore-kinds" in argv:
        i = argv.index("--ignore-kinds")
        ignore = set(argv[i + 1].split(",")) if i + 1 < len(argv) else set()
        argv = argv[:i] + argv[i + 2 :]
    if len(argv) != 2:
        print(__doc__)
        return 2
    a, b = ([e for e in _normalise(_load(Path(p))) if e.get("kind") not in ignore] for p in argv)
    if ignore:
        print(f"leaving out event kinds {sorted(ignore)}")
    print(f"{argv[0]}: {len(a)} events; {argv[1]}: {len(b)} events")
    ka, kb = Counter(e.get("kind") for e in a), Counter(e.get("kind") for e in b)
    for kind in sorted(set(ka) | set(kb)):
        print(f"  {kind:16s} {ka[kind]:4d} {kb[kind]:4d}")
    same = 0
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        d = list(_diff(x, y))
        if not d:
            same += 1
            continue
        print(f"event {i} ({x.get('kind')} @ step {x.get('step')}) differs:")
        for path, u, v in d[:8]:
            print(f"    {path}: {json.dumps(u, default=str)[:160]} | {json.dumps(v, default=str)[:160]}")
    print(f"identical after normalising: {same} of {max(len(a), len(b))}")
    return 0 if same == len(a) == len(b) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
