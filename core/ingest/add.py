"""Adding loaded documents to a workspace: content-hash identity, so the same text never goes in twice."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sqlmodel import select

from core.ids import scope_of
from core.ingest.formats import clean_text
from core.models import Document, Workspace
from core.store import Store


@dataclass
class AddResult:
    added: list[Document] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # titles of documents already present
    same_as: list[tuple[str, str, str]] = field(default_factory=list)  # per duplicate: (file, title, stored id)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def add_documents(store: Store, ws: Workspace, docs) -> AddResult:
    """Store each LoadedDoc whose text is new to the workspace; documents already present are reported."""
    out = AddResult()
    assert ws.id is not None  # a stored row has its key
    with store.session() as s:
        seen = dict(s.exec(select(Document.content_hash, Document.id).where(Document.workspace_id == ws.id)).all())
        pending: dict[str, Document] = {}
        for d in docs:
            h = text_hash(d.text)
            # a title or id field may hold control characters the text was cleaned of (PostgreSQL refuses NUL)
            title, ext_id = clean_text(d.title), clean_text(d.external_id) if d.external_id is not None else None
            if h in seen:
                out.duplicates.append(title)
                out.same_as.append((clean_text(d.filename), title, seen[h]))
                doc = pending.get(h) or s.get(Document, seen[h])
                assert doc is not None  # `seen` was read from this workspace's Document rows
                _alias(doc, ext_id)
                s.add(doc)
                continue
            doc = Document(
                id=scope_of(ws).id(h),
                workspace_id=ws.id,
                content_hash=h,
                external_id=ext_id,
                title=title[:500],
                filename=clean_text(d.filename),
                mime=d.mime,
                n_chars=len(d.text),
                text=d.text,
                meta=dict(d.meta or {}),
            )
            s.add(doc)
            seen[h] = doc.id
            pending[h] = doc
            out.added.append(doc)
        s.commit()
    return out


def _alias(doc: Document, external_id: str | None) -> None:
    """A corpus may hold the same passage under two ids: the stored document answers to both."""
    if external_id is None or external_id == doc.external_id:
        return
    ids = list((doc.meta or {}).get("external_ids", [doc.external_id] if doc.external_id is not None else []))
    if external_id not in ids:
        doc.meta = dict(doc.meta or {}) | {"external_ids": ids + [external_id]}
