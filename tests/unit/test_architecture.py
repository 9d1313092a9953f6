"""The architecture contract of issue 12, checked on the source itself (AST only, nothing imported but the runner):

(a) the package-level import graph has no cycle; (b) the layer contract (LAYERS, lowest first: a unit may import its
own layer and the layers below, never above); (c) core.algorithms touches no store (core.store, core.models,
sqlmodel, sqlalchemy); (d) no module imports another module's private name, or reaches `module._name`; (e) no module
over MAX_LINES lines; (f) every stage the runner registers is typed `(ctx: BuildContext) -> Iterator[Progress]`.

Every import counts: module level, function-local and `if TYPE_CHECKING:` alike (a type-only import is still a
dependency a reader follows). The checkers take the root directory, so each is shown failing on a small tree built
in a temporary directory by the `*_can_fail` tests.
"""

from __future__ import annotations

import ast
import collections.abc
import inspect
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "ui", "views")  # plus the top-level module app.py
MAX_LINES = 400
# Units of the graph: core's subpackages and top-level modules (core.pipeline, core.text, ...), ui, views, app. The
# build layer is split one level deeper (core.pipeline.context, .runner, .stages, ...): the cycle issue 12 removed
# lived there (the runner imports every stage, so no stage may import the runner).
SPLIT = ("core.pipeline",)
LAYERS: list[tuple[str, ...]] = [
    ("core.text", "core.query_config", "core.config", "core.liveness", "core.models", "core.protocols",
     "core.secrets"),
    ("core.store", "core.ids"),
    ("core.index", "core.ingest", "core.algorithms", "core.access"),
    ("core.extract",),
    ("core.backends",),
    ("core.resolution", "core.graph"),
    ("core.pipeline",),
    ("core.retrieval",),
    ("core.explore", "core.quality"),
    ("core.workspace", "core.answer", "core.history", "core.export", "core.stats", "core.eval", "core.evaluation",
     "core.worker",
     "core.__main__", "core.cli_access", "core.cli_evaluate"),
    ("ui", "views", "app"),
]
STORE_ACCESS = ("core.store", "core.models", "sqlmodel", "sqlalchemy")


@dataclass(frozen=True)
class Import:
    """One import statement's target as seen from `src` (a project module), with where it is written."""

    src: str
    target: str  # a module name (a project module when it resolves to one)
    names: tuple[str, ...]  # the names a `from ... import` takes ((), for `import x`)
    where: str  # "path:line"

    def __str__(self) -> str:
        what = f"from {self.target} import {', '.join(self.names)}" if self.names else f"import {self.target}"
        return f"{self.where}: {what}"


# -- reading the tree ----------------------------------------------------------------------------------------------
def sources(root: Path) -> dict[str, Path]:
    """Module name -> file for core/, ui/, views/ and app.py under `root`."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    if (root / "app.py").exists():
        out["app"] = root / "app.py"
    return out


def _resolve(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(root: Path) -> list[Import]:
    """Every import of every module under `root`, function-local ones included. `from pkg import name` targets the
    module `pkg.name` when that is a module of the tree, else `pkg`."""
    mods = sources(root)
    out = []
    for mod, path in mods.items():
        rel = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                out += [Import(mod, a.name, (), f"{rel}:{node.lineno}") for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(mod, path, node)
                subs = [a.name for a in node.names if f"{target}.{a.name}" in mods]
                rest = tuple(a.name for a in node.names if a.name not in subs)
                out += [Import(mod, f"{target}.{s}", (), f"{rel}:{node.lineno}") for s in subs]
                if rest:
                    out.append(Import(mod, target, rest, f"{rel}:{node.lineno}"))
    return out


def unit(mod: str) -> str | None:
    """The graph unit a module belongs to (None for a module outside the project)."""
    parts = mod.split(".")
    if parts[0] in ("ui", "views", "app"):
        return parts[0]
    if parts[0] != "core":
        return None
    if len(parts) == 1:
        return "core"
    top = f"core.{parts[1]}"
    return f"{top}.{parts[2]}" if top in SPLIT and len(parts) > 2 else top


def unit_graph(root: Path) -> dict[tuple[str, str], list[Import]]:
    """(importing unit, imported unit) -> the imports making that edge; edges inside a unit are left out."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports(root):
        a, b = unit(imp.src), unit(imp.target)
        if a and b and a != b:
            edges.setdefault((a, b), []).append(imp)
    return edges


# -- (a) cycles ----------------------------------------------------------------------------------------------------
def cycles(root: Path) -> list[str]:
    """One message per strongly connected component of the unit graph: a cycle through it, and the imports making
    each of its edges."""
    edges = unit_graph(root)
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    comps: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    out = []
    for comp in comps:
        cyc = _a_cycle(comp[0], set(comp), succ)
        lines = [f"  {imp}" for a, b in zip(cyc, cyc[1:]) for imp in edges[a, b]]
        out.append("import cycle " + " -> ".join(cyc) + ", made by:\n" + "\n".join(lines))
    return out


def _a_cycle(start: str, comp: set[str], succ: dict[str, list[str]]) -> list[str]:
    """The shortest cycle through `start` inside one component (breadth first)."""
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(succ[v]):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w in comp and w not in prev:
                prev[w] = v
                todo.append(w)
    raise AssertionError(f"{start} is in a cycle but none was found")


# -- (b) layers ----------------------------------------------------------------------------------------------------
def layer_of(u: str, layers: list[tuple[str, ...]]) -> int | None:
    for i, layer in enumerate(layers):
        if any(u == p or u.startswith(p + ".") for p in layer):
            return i
    return None


def layer_violations(root: Path, layers: list[tuple[str, ...]] = LAYERS) -> list[str]:
    """Imports from a unit to a unit of a higher layer, and units the contract does not place."""
    out = []
    for (a, b), imps in sorted(unit_graph(root).items()):
        la, lb = layer_of(a, layers), layer_of(b, layers)
        for u, lu in ((a, la), (b, lb)):
            if lu is None:
                out.append(f"{u} is in no layer of the contract: add it to LAYERS in {Path(__file__).name} "
                           f"(imported by {imps[0]})")
        if la is not None and lb is not None and lb > la:
            out += [f"{imp}  ({a}, layer {la}, imports {b}, layer {lb}: move the code down, or pass it in)"
                    for imp in imps]
    return sorted(set(out))


# -- (c) pure algorithms -------------------------------------------------------------------------------------------
def store_access(root: Path, package: str = "core.algorithms", banned: tuple[str, ...] = STORE_ACCESS) -> list[str]:
    return [f"{imp}  ({package} is pure maths: pass rows in as plain values instead)" for imp in imports(root)
            if unit(imp.src) == package and any(imp.target == b or imp.target.startswith(b + ".") for b in banned)]


# -- (d) private names ---------------------------------------------------------------------------------------------
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def private_uses(root: Path) -> list[str]:
    """`from <project module> import _name`, and `<project module>._name` through a name bound by an import."""
    mods = sources(root)
    out = []
    for imp in imports(root):
        if imp.target.split(".")[0] in ("core", "ui", "views", "app") and imp.target != imp.src:
            out += [f"{imp.where}: from {imp.target} import {n}" for n in imp.names if _private(n)]
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = {}  # local name -> project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods:
                        bound[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(mod, path, node)
                bound |= {a.asname or a.name: f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                head = _dotted(node.value)
                target = bound.get(head or "", head if head in mods else None)
                if target and target != mod:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {head}.{node.attr} (private to {target})")
    return sorted(out)


# -- (e) size ------------------------------------------------------------------------------------------------------
def long_modules(root: Path, limit: int = MAX_LINES) -> list[str]:
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in sources(root).values()}
    return [f"{p.relative_to(root)}: {n} lines (> {limit}: split it by concern)" for p, n in sizes.items() if n > limit]


# -- (f) stage signatures ------------------------------------------------------------------------------------------
def stage_signature_problems(registered) -> list[str]:
    """`registered`: the runner's (name, label, function) rows. Each function must take one parameter `ctx:
    BuildContext` and return `Iterator[Progress]`, as annotations a type checker reads."""
    from core.pipeline.context import BuildContext, Progress

    names = {"BuildContext": BuildContext, "Progress": Progress, "Iterator": collections.abc.Iterator}
    out = []
    for name, _, fn in registered:
        where = f"stage {name!r} ({fn.__module__}.{fn.__qualname__})"
        try:
            hints = typing.get_type_hints(fn, localns=names)
        except Exception as exc:  # an annotation naming something the module does not define
            out.append(f"{where}: annotations do not resolve ({exc})")
            continue
        params = list(inspect.signature(fn).parameters.values())
        ret = hints.get("return")
        if [p.name for p in params] != ["ctx"] or hints.get("ctx") is not BuildContext:
            out.append(f"{where}: takes ({', '.join(map(str, params))}), want exactly (ctx: BuildContext)")
        if typing.get_origin(ret) is not collections.abc.Iterator or typing.get_args(ret) != (Progress,):
            out.append(f"{where}: returns {ret!r}, want Iterator[Progress]")
    return out


# -- the checks on this checkout -----------------------------------------------------------------------------------
def _report(title: str, found: list[str]) -> str:
    return f"{title} ({len(found)}):\n" + "\n".join(found)


def test_no_import_cycle_between_packages():
    found = cycles(ROOT)
    assert not found, _report("cycles in the package import graph (break each at one of the imports listed)", found)


def test_layer_contract():
    found = layer_violations(ROOT)
    assert not found, _report("imports against the layer contract (lower layers never import higher ones)", found)


def test_algorithms_touch_no_store():
    found = store_access(ROOT)
    assert not found, _report("core.algorithms reaches the store", found)


def test_no_private_name_crosses_a_module():
    found = private_uses(ROOT)
    assert not found, _report("private names used across modules (make them public, or move the code)", found)


def test_no_module_over_the_size_limit():
    found = long_modules(ROOT)
    assert not found, _report(f"modules over {MAX_LINES} lines", found)


def test_every_stage_is_typed():
    from core.pipeline.runner import stages

    found = stage_signature_problems(stages())
    assert not found, _report("stages not typed (ctx: BuildContext) -> Iterator[Progress]", found)


# -- each checker fails on a tree that breaks its rule -------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if str(parent) != "." and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
        path.write_text(text)
    return root


def test_cycle_check_can_fail(tmp_path):
    root = _tree(tmp_path, {
        "core/store.py": "from core.graph.view import View\n",
        "core/graph/view.py": "def f():\n    from ..retrieval import base\n",  # function-local, relative
        "core/retrieval/base.py": "import core.store\n",
        "core/text.py": "from core.store import x\n",  # not in the cycle
    })
    (found,) = cycles(root)
    assert found.startswith("import cycle core.graph -> core.retrieval -> core.store -> core.graph, made by:")
    assert "core/graph/view.py:2: import core.retrieval.base" in found
    assert "core/text.py" not in found
    assert cycles(_tree(tmp_path / "ok", {"core/store.py": "import core.text\n", "core/text.py": "import os\n"})) == []


def test_cycle_inside_the_build_layer_is_seen(tmp_path):
    root = _tree(tmp_path, {"core/pipeline/runner.py": "from core.pipeline.stages.chunk import chunk_stage\n",
                            "core/pipeline/stages/chunk.py": "from core.pipeline.runner import Progress\n"})
    (found,) = cycles(root)
    assert "core.pipeline.runner -> core.pipeline.stages -> core.pipeline.runner" in found


def test_layer_check_can_fail(tmp_path):
    root = _tree(tmp_path, {"core/store.py": "from core.models import Node\n",
                            "core/models.py": "def f():\n    from core.retrieval.base import Resources\n",
                            "core/retrieval/base.py": "", "core/novel.py": "import core.text\n",
                            "core/text.py": ""})
    found = layer_violations(root)
    assert "core/models.py:2: from core.retrieval.base import Resources  (core.models, layer 0, imports " \
           "core.retrieval, layer 7: move the code down, or pass it in)" in found
    assert any(f.startswith("core.novel is in no layer of the contract") for f in found)
    assert len(found) == 2  # store -> models is downward


def test_store_check_can_fail(tmp_path):
    root = _tree(tmp_path, {"core/algorithms/ppr.py": "import numpy\nfrom sqlmodel import select\n",
                            "core/algorithms/chnsw.py": "def f():\n    from core.store import Store\n",
                            "core/graph/view.py": "from core.store import Store\n"})
    assert [f.split("  (")[0] for f in store_access(root)] == [
        "core/algorithms/chnsw.py:2: from core.store import Store", "core/algorithms/ppr.py:2: from sqlmodel import select"]


def test_private_check_can_fail(tmp_path):
    root = _tree(tmp_path, {
        "core/text.py": "_x = 1\nprint(_x)\n",
        "core/store.py": "from core.text import _x, y\n",
        "core/graph/view.py": "import core.text\nfrom core import text as t\nfrom ..retrieval import base\n"
                              "a = core.text._x\nb = t._x\nc = base._y\nd = t.__name__\ne = self._z\n",
        "core/retrieval/base.py": "",
        "ui/page.py": "from core.text import _x\n",
    })
    assert private_uses(root) == [
        "core/graph/view.py:4: core.text._x (private to core.text)",
        "core/graph/view.py:5: t._x (private to core.text)",
        "core/graph/view.py:6: base._y (private to core.retrieval.base)",
        "core/store.py:1: from core.text import _x",
        "ui/page.py:1: from core.text import _x",
    ]


def test_size_check_can_fail(tmp_path):
    root = _tree(tmp_path, {"core/big.py": "x = 1\n" * 401, "views/ok.py": "x = 1\n" * 400})
    assert long_modules(root) == ["core/big.py: 401 lines (> 400: split it by concern)"]


def test_stage_check_can_fail():
    from core.pipeline.context import BuildContext, Progress

    def good(ctx: BuildContext) -> collections.abc.Iterator[Progress]:
        yield Progress(0, 0)

    def untyped(ctx):
        yield None

    def two(ctx: BuildContext, extra: int = 0) -> list[Progress]:
        return []

    def broken(ctx: NoSuchName) -> collections.abc.Iterator[Progress]:  # noqa: F821
        yield Progress(0, 0)

    found = stage_signature_problems([("good", "", good), ("untyped", "", untyped), ("two", "", two),
                                      ("broken", "", broken)])
    assert [f.split(" (")[0] for f in found] == ["stage 'untyped'", "stage 'untyped'", "stage 'two'", "stage 'two'",
                                                 "stage 'broken'"]
    assert "want exactly (ctx: BuildContext)" in found[0] and "want Iterator[Progress]" in found[1]


@pytest.mark.parametrize("mod,expected", [("core.pipeline.stages.embed", "core.pipeline.stages"), ("core.text", "core.text"),
                                          ("core.retrieval.hlg.beam", "core.retrieval"), ("views.ask", "views"),
                                          ("numpy", None)])
def test_units(mod, expected):
    assert unit(mod) == expected
