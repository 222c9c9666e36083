"""The package's layers hold: the import contracts of pyproject.toml ``[tool.importlinter]`` are checked here,
so ``make test`` and CI fail when an import breaks one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    # the checkout under test, whatever copy of harnessrl the environment has installed
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_import_contracts_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(lint_imports), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, f"an import contract is broken:\n{out.stdout}\n{out.stderr}"
    assert "0 broken" in out.stdout, out.stdout
