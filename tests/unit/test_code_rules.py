"""House rules of the code base that a reviewer would otherwise have to remember: ruff's checks (ruff.toml) pass,
and no module imports another module's private name (a leading underscore means "only this module uses it")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "ui", "views", "bench")


def _sources() -> list[Path]:
    return sorted(p for d in PACKAGES for p in (ROOT / d).rglob("*.py")) + [ROOT / "app.py"]


def private_imports(path: Path) -> list[str]:
    """`from <project module> import _name` lines of one file, as "file:line module._name"."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            out += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_the_rule_finds_a_private_import():
    bad = ROOT / "core" / "_rule_probe_tmp.py"
    try:
        bad.write_text("from core.pipeline.stages.embed import _secret\n", encoding="utf-8")
        assert private_imports(bad) == ["core/_rule_probe_tmp.py:1 core.pipeline.stages.embed._secret"]
    finally:
        bad.unlink()


def test_no_module_imports_another_modules_private_name():
    found = [hit for p in _sources() for hit in private_imports(p)]
    assert not found, "private names imported across modules (make them public, or move the code):\n" + "\n".join(
        found)


def test_ruff_finds_nothing():
    """ruff.toml's rules (pyflakes, pycodestyle, import order, bugbear) over the whole checkout."""
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
