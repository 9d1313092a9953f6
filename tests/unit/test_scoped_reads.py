"""Rules that keep one workspace's rows out of another's pages (issue 35, point 1), checked on the source.

* A row of a workspace's table is read by its id only through `core.ids.owned` (which checks the workspace) or by a
  query that names the workspace: no `s.get(Node, x)` elsewhere, and every `select(...)` of such a table that picks
  rows by id (`col(T.id).in_(...)`, `T.id == ...`) says `workspace_id` in the same statement. The few reads by ids the
  server made itself (a worker's claimed run, a job's own evaluation) are listed in ALLOWED with the reason.
* Every choice widget of the pages (selectbox, radio, multiselect, select slider) is drawn through ui/offered.py,
  which keeps the value among the options it offered (a hand-made websocket message can send any value).
Each checker is shown failing on a small probe."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = {"Node", "Edge", "Community", "Document", "BuildRun", "Evaluation", "EvaluationResult", "CommunityVariant",
          "QueryLog", "EntityMerge", "FailedUnit", "Checkpoint", "Artifact", "Member", "UploadRecord"}
ALLOWED = {  # file: the model names read by id there, and why that id is not the browser's
    "core/ids.py": ({"Workspace", *MODELS}, "owned() itself"),
    "core/pipeline/runs.py": ({"BuildRun"}, "runs by the id the server created or claimed (workers, the job panel)"),
    "core/worker.py": ({"BuildRun"}, "the run this worker claimed through its lease"),
    "core/evaluation/records.py": ({"Evaluation"}, "set_fields: the job's own evaluation"),
    "core/ingest/add.py": ({"Document"}, "a document found by content hash among this workspace's"),
    "core/resolution/merge.py": ({"Node"}, "is a merged id free again, in any workspace (ids are unique)"),
}
WIDGETS = ("selectbox", "radio", "multiselect", "select_slider")


def _sources(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py"))


def unscoped_reads(path: Path, rel: str) -> list[str]:
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    allowed = ALLOWED.get(rel, (set(), ""))[0]
    out = []

    def segment(n: ast.AST) -> str:
        return "\n".join(lines[n.lineno - 1 : (n.end_lineno or n.lineno)])

    for node in ast.walk(ast.parse(src)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in MODELS
                and node.args[0].id not in allowed):
            out.append(f"{rel}:{node.lineno}: get({node.args[0].id}, …) without its workspace: use core.ids.owned")
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.With,
                                                                 ast.While, ast.Try, ast.AsyncFunctionDef)):
            seg = segment(node.iter if isinstance(node, ast.For) else node)
            for model in set(re.findall(r"select\((?:col\()?(\w+)[.,)]", seg)) & MODELS:
                by_id = re.search(rf"col\({model}\.id\)\.in_|{model}\.id ==", seg)
                if by_id and f"{model}.workspace_id" not in seg and model not in allowed:
                    out.append(f"{rel}:{node.lineno}: select({model}) by id without {model}.workspace_id")
    return out


def raw_widgets(path: Path, rel: str) -> list[str]:
    src = path.read_text(encoding="utf-8")
    return [f"{rel}:{src[:m.start()].count(chr(10)) + 1}: .{m.group(1)}( drawn directly: use ui.offered"
            for m in re.finditer(rf"(?<!offered\.one\()(?<!offered\.many\()(?<!offered\.maybe\()\b\w+(?:\[\d\])?\.({'|'.join(WIDGETS)})\(", src)]


def test_reads_by_id_name_their_workspace():
    found = [f for p in _sources("core", "ui", "views") for f in unscoped_reads(p, str(p.relative_to(ROOT)))]
    assert not found, "\n".join(found)


def test_choice_widgets_keep_to_what_they_offered():
    found = [f for p in [*_sources("ui", "views"), ROOT / "app.py"] if p.name != "offered.py"
             for f in raw_widgets(p, str(p.relative_to(ROOT)))]
    assert not found, "\n".join(found)


def test_the_checkers_can_fail(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(s, i, ws):\n"
                     "    a = s.get(Node, i)\n"
                     "    b = s.exec(select(Community).where(col(Community.id).in_(i))).all()\n"
                     "    c = s.exec(select(Community).where(Community.workspace_id == ws, Community.id == i)).all()\n"
                     "    x = st.selectbox('a', [1])\n"
                     "    y = offered.one(st.radio, 'b', [1])\n")
    assert len(unscoped_reads(probe, "probe.py")) == 2
    assert [f.split(":")[1] for f in raw_widgets(probe, "probe.py")] == ["5"]
