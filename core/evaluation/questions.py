"""A questions file brought by the user, its gold documents resolved against the workspace, and the set's hash.

Formats: JSON lines (the one `python -m core eval` reads), CSV, or one JSON list. A row has "question", an optional
"answer", and its gold documents by external id (`gold_ids`, as `core eval`), by title (`gold_titles`), by file
name (`gold_files`), or by any of the three (`gold`, or `documents` as data/sample_questions.json has it), the
first of these fields the row fills being read (hotpotqa's rows name their gold twice, by id and by title); in a
CSV cell several are separated by "|". A gold name resolves to the documents answering to it (an external id,
also one of an identical passage merged into a document; a title, case and spacing aside; a file name, its path
aside). A row none of whose gold names a known document is left out and listed with the reason, as is a row that
cannot be read (not JSON, no question); a gold name that resolves to nothing beside others that do is dropped from
its row and listed too. Nothing else is refused.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import PurePath

from sqlmodel import col, select

from core.models import Document
from core.store import Store
from core.text import norm_key

GOLD_FIELDS = {"gold_ids": "id", "gold_titles": "title", "gold_files": "file", "gold": "any", "documents": "any"}
FORMATS = ("jsonl", "csv", "json")


@dataclass
class Rejected:
    """A row left out (or, `kept`, a gold name dropped from a row that stays), with the reason."""

    line: int
    text: str
    reason: str
    kept: bool = False


@dataclass
class QuestionSet:
    questions: list[dict] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    @property
    def hash(self) -> str:
        return question_hash(self.questions)


def _names(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split("|") if p.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [str(value)]


def _row(d: dict, n: int) -> dict:
    """A raw row: {"id", "question", "answer", "gold": [(by, name)]}; ValueError when it is not one."""
    if not isinstance(d, dict):
        raise ValueError("not an object")
    question = str(d.get("question") or "").strip()
    if not question:
        raise ValueError("no question")
    # the first gold field the row fills (a row with gold_ids and gold_titles, as hotpotqa's, names each twice)
    key, by = next(((k, b) for k, b in GOLD_FIELDS.items() if _names(d.get(k))), ("gold", "any"))
    gold = [(by, name) for name in dict.fromkeys(_names(d.get(key)))]
    answer = d.get("answer")
    answer = str(answer).strip() if answer not in (None, "") else None
    return {"id": str(d.get("id") if d.get("id") not in (None, "") else n), "question": question,
            "answer": answer or None, "gold": gold, "generated": bool(d.get("generated", False))}


def parse_rows(data: bytes | str, filename: str = "questions.jsonl") -> tuple[list[tuple[int, dict]], list[Rejected]]:
    """(line, raw row) per readable row, and the unreadable ones with their reason."""
    text = data.decode("utf-8-sig", errors="replace") if isinstance(data, bytes) else data
    suffix = PurePath(filename).suffix.lower().lstrip(".")
    rows: list[tuple[int, dict]] = []
    bad: list[Rejected] = []
    if suffix == "csv":
        items: list[tuple[int, object]] = [(i + 2, r) for i, r in enumerate(csv.DictReader(io.StringIO(text)))]
    elif suffix == "json" or text.lstrip().startswith("["):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            return [], [Rejected(1, text[:120], f"not JSON ({exc})")]
        items = list(enumerate(loaded if isinstance(loaded, list) else [loaded], 1))
    else:
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                bad.append(Rejected(n, line[:120], f"not a JSON line ({exc.msg})"))
    for n, item in items:
        try:
            rows.append((n, _row(item, n)))  # type: ignore[arg-type]
        except ValueError as exc:
            bad.append(Rejected(n, json.dumps(item, ensure_ascii=False)[:120], str(exc)))
    return rows, bad


def document_index(store: Store, ws_id: int) -> dict[str, dict[str, list[str]]]:
    """{"id"|"title"|"file": {normalized name: [document ids]}} of the workspace's documents."""
    out: dict[str, dict[str, list[str]]] = {"id": {}, "title": {}, "file": {}}
    where = Document.workspace_id == ws_id
    order = (col(Document.created_at), col(Document.id))
    with store.session() as s:
        ids = s.exec(select(Document.id, Document.external_id, Document.meta).where(where).order_by(*order)).all()
        names = s.exec(select(Document.id, Document.title, Document.filename).where(where).order_by(*order)).all()
    for doc, ext, meta in ids:
        merged = [str(e) for e in (meta or {}).get("external_ids", [])]
        for x in {doc, *([ext] if ext is not None else []), *merged}:
            out["id"].setdefault(str(x), []).append(doc)
    for doc, title, fname in names:
        out["title"].setdefault(norm_key(title or ""), []).append(doc)
        for f in {fname, PurePath(fname or "").name}:
            out["file"].setdefault((f or "").lower(), []).append(doc)
    return out


def _lookup(index: dict[str, dict[str, list[str]]], by: str, name: str) -> list[str]:
    keys = {"id": name, "title": norm_key(name), "file": name.lower()}
    if by == "file":
        return index["file"].get(keys["file"]) or index["file"].get(PurePath(name).name.lower(), [])
    for kind in (["id", "title", "file"] if by == "any" else [by]):
        if found := index[kind].get(keys[kind]):
            return list(dict.fromkeys(found))
    return []


def resolve(store: Store, ws_id: int, rows: list[tuple[int, dict]]) -> QuestionSet:
    """Questions with their gold resolved (module doc); rows naming no known document listed and left out."""
    index = document_index(store, ws_id)
    out = QuestionSet()
    for n, row in rows:
        gold, missing = [], []
        for by, name in row["gold"]:
            docs = _lookup(index, by, name)
            (gold.append({"key": name, "docs": docs}) if docs else missing.append(name))
        if not row["gold"]:
            out.rejected.append(Rejected(n, row["question"][:120], "no gold documents named"))
            continue
        if not gold:
            out.rejected.append(Rejected(n, row["question"][:120],
                                         f"names no known document: {', '.join(map(repr, missing))}"))
            continue
        for name in missing:
            out.rejected.append(Rejected(n, row["question"][:120], f"gold {name!r} names no known document: "
                                         "dropped, the row kept with its other gold", kept=True))
        out.questions.append({"id": row["id"], "question": row["question"], "answer": row["answer"],
                              "gold": gold, "generated": row["generated"]})
    return out


def read_questions(store: Store, ws_id: int, data: bytes | str, filename: str = "questions.jsonl") -> QuestionSet:
    """Parse a questions file and resolve its gold against workspace `ws_id`."""
    rows, bad = parse_rows(data, filename)
    out = resolve(store, ws_id, rows)
    out.rejected = sorted(bad + out.rejected, key=lambda r: r.line)
    return out


def check_questions(questions: list[dict]) -> list[dict]:
    """The set as the job stores it (after the page's edits): each question with a text and gold documents,
    ids made unique; ValueError for an empty set."""
    out, seen = [], set()
    for i, q in enumerate(questions):
        text = str(q.get("question") or "").strip()
        gold = [{"key": str(g.get("key", "")), "docs": [str(d) for d in g.get("docs", [])]}
                for g in q.get("gold", []) if g.get("docs")]
        if not text or not gold:
            continue
        qid = str(q.get("id") or i + 1)
        while qid in seen:
            qid += "'"
        seen.add(qid)
        answer = q.get("answer")
        out.append({"id": qid, "question": text, "answer": str(answer).strip() if answer else None, "gold": gold,
                    "generated": bool(q.get("generated", False))})
    if not out:
        raise ValueError("no question with a question text and a known gold document")
    return out


def question_hash(questions: list[dict]) -> str:
    """sha256 of the set's canonical JSON: each question's text, answer and gold documents, in order."""
    canon = [{"question": q["question"], "answer": q.get("answer"),
              "gold": [sorted(g["docs"]) for g in q["gold"]]} for q in questions]
    blob = json.dumps(canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def example_file(store: Store, ws_id: int, fmt: str = "jsonl") -> str:
    """A questions file to download as a model: two rows over the workspace's first documents (one by title, one
    by external id or file name), or over made-up names when it holds none."""
    with store.session() as s:
        docs = list(s.exec(select(Document.title, Document.external_id, Document.filename)
                           .where(Document.workspace_id == ws_id).order_by(col(Document.created_at)).limit(2)))
    a = docs[0] if docs else ("Tidewater Bridge", None, "bridge.md")
    b = docs[1] if len(docs) > 1 else a
    rows = [{"id": "q1", "question": f"What does the document {a[0]!r} say?", "answer": "",
             "gold_titles": [a[0]]},
            {"id": "q2", "question": f"Which facts link {a[0]!r} and {b[0]!r}?", "answer": "",
             "gold_ids" if b[1] else "gold_files": [b[1] or b[2]]}]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["id", "question", "answer", "gold"])
        w.writerow(["q1", rows[0]["question"], "", a[0]])
        w.writerow(["q2", rows[1]["question"], "", f"{a[0]}|{b[1] or b[2]}"])
        return buf.getvalue()
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
