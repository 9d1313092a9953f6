"""A probe set made from the workspace itself, for users with no gold set.

* multi-hop: two documents A and B that mention one entity E (by the build's "mentions" edges from their chunks),
  each also mentioning an entity the other does not (X in A, Y in B): "What connects X and Y?", answer E, gold A
  and B. Answering needs both documents.
* single-hop: a statement of document D that names an entity X: the statement with X blanked, "Which name
  completes this: ...?", answer X, gold D.

Offline the wording is the template's; with a model backend that can phrase (`Phrasing`: the model backends'
`phrase`), the model rewords the template's question, and a reply that is no usable question (empty, too long,
several lines, or giving the answer away) keeps the template. Which documents, entities and statements are drawn is
decided by a seeded generator alone, so a seed gives the same set (and, offline, the same questions). Every question
is marked generated=True; the set is a plain list of dicts (core/evaluation/__init__.py) the page may edit.
"""

from __future__ import annotations

import random
import re
from typing import Protocol, runtime_checkable

from sqlalchemy.orm import aliased
from sqlmodel import select

from core.models import Document, Edge, Node
from core.store import Store


@runtime_checkable
class Phrasing(Protocol):
    def phrase(self, prompt: str) -> str: ...


def _mentions(store: Store, ws_id: int) -> dict[str, dict[str, str]]:
    """{document id: {entity id: entity name}} from the chunks' "mentions" edges (extracted entities only)."""
    src, dst = aliased(Node), aliased(Node)
    out: dict[str, dict[str, str]] = {}
    with store.session() as s:
        rows = s.exec(select(src.document_id, dst.id, dst.title).select_from(Edge)
                      .join(src, src.id == Edge.src).join(dst, dst.id == Edge.dst)  # type: ignore[arg-type]
                      .where(Edge.workspace_id == ws_id, Edge.kind == "mentions", src.kind == "chunk",
                             dst.kind == "entity", dst.layer == 0)
                      .order_by(src.document_id, dst.id)).all()
    for doc, eid, name in rows:
        if doc and name and len(name) > 2:
            out.setdefault(doc, {})[eid] = name
    return out


def _statements(store: Store, ws_id: int) -> list[tuple[str, str, str, str]]:
    """(statement id, text, document id, entity name it mentions), in id order."""
    st, ent = aliased(Node), aliased(Node)
    with store.session() as s:
        rows = s.exec(select(st.id, st.text, st.document_id, ent.title).select_from(Edge)
                      .join(st, st.id == Edge.src).join(ent, ent.id == Edge.dst)  # type: ignore[arg-type]
                      .where(Edge.workspace_id == ws_id, Edge.kind == "mentions", st.kind == "statement",
                             ent.kind == "entity", ent.layer == 0)
                      .order_by(st.id, ent.id)).all()
    out = []
    for sid, text, doc, name in rows:
        if doc and name and text and len(name) > 2 and re.search(re.escape(name), text, re.IGNORECASE):
            out.append((sid, text, doc, name))
    return out


def _titles(store: Store, ws_id: int) -> dict[str, str]:
    with store.session() as s:
        return dict(s.exec(select(Document.id, Document.title).where(Document.workspace_id == ws_id)).all())


def multi_hop(store: Store, ws_id: int, n: int, rng: random.Random) -> list[dict]:
    mentions = _mentions(store, ws_id)
    titles = _titles(store, ws_id)
    docs_of: dict[str, list[str]] = {}
    for doc, ents in mentions.items():
        for e in ents:
            docs_of.setdefault(e, []).append(doc)
    pairs = sorted({(e, a, b) for e, ds in docs_of.items() for a in ds for b in ds if a < b})
    rng.shuffle(pairs)
    out: list[dict] = []
    used: set[tuple[str, str]] = set()
    for e, a, b in pairs:
        if len(out) >= n:
            break
        if (a, b) in used:
            continue
        only_a = sorted(set(mentions[a]) - set(mentions[b]))
        only_b = sorted(set(mentions[b]) - set(mentions[a]))
        if not only_a or not only_b:
            continue
        x, y = mentions[a][rng.choice(only_a)], mentions[b][rng.choice(only_b)]
        name = mentions[a][e]
        if name.lower() in (x.lower(), y.lower()):
            continue
        used.add((a, b))
        out.append({"question": f"What connects {x} and {y}?", "answer": name,
                    "gold": [{"key": titles.get(a, a), "docs": [a]}, {"key": titles.get(b, b), "docs": [b]}],
                    "kind": "multi-hop", "generated": True})
    return out


def single_hop(store: Store, ws_id: int, n: int, rng: random.Random) -> list[dict]:
    rows = _statements(store, ws_id)
    titles = _titles(store, ws_id)
    rng.shuffle(rows)
    out: list[dict] = []
    seen: set[str] = set()
    for _sid, text, doc, name in rows:
        if len(out) >= n:
            break
        if text in seen:
            continue
        seen.add(text)
        cloze = re.sub(re.escape(name), "___", text, count=1, flags=re.IGNORECASE).strip()
        out.append({"question": f"Which name completes this: \"{cloze}\"?", "answer": name,
                    "gold": [{"key": titles.get(doc, doc), "docs": [doc]}], "kind": "single-hop",
                    "generated": True})
    return out


REWORD = ("Rewrite this question so it reads naturally, keeping its meaning and every name in it. Reply with the "
          "question alone, on one line.\n\nQuestion: {question}")


def reworded(backend, q: dict) -> str:
    """The model's wording of probe `q`, or the template's when the reply is no usable question."""
    if not isinstance(backend, Phrasing):
        return q["question"]
    try:
        reply = backend.phrase(REWORD.format(question=q["question"]))
    except Exception:  # noqa: BLE001 - a failed wording keeps the template's
        return q["question"]
    text = (reply or "").strip().strip('"').strip()
    answer = (q.get("answer") or "").lower()
    usable = (text and "\n" not in text and len(text) <= 300 and text.endswith("?")
              and (q.get("kind") != "single-hop" or answer not in text.lower()))
    return text if usable else q["question"]


def probe_set(store: Store, ws_id: int, n_multi: int = 20, n_single: int = 20, seed: int = 0,
              backend=None) -> list[dict]:
    """The probe set (module doc): up to `n_multi` multi-hop and `n_single` single-hop questions, ids p1, p2, ..."""
    rng = random.Random(seed)
    qs = multi_hop(store, ws_id, n_multi, rng) + single_hop(store, ws_id, n_single, rng)
    for i, q in enumerate(qs, 1):
        q["id"] = f"p{i}"
        if backend is not None:
            q["question"] = reworded(backend, q)
    return qs
