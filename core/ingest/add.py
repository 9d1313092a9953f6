"""Adding loaded documents to a workspace: content-hash identity, so the same text never goes in twice."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sqlmodel import select

from core.models import Document, Workspace
from core.store import Store, content_id


@dataclass
class AddResult:
    added: list[Document] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # titles of documents already present

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.duplicates)} already present"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def add_documents(store: Store, ws: Workspace, docs) -> AddResult:
    """Store each LoadedDoc whose text is new to the workspace; documents already present are reported."""
    out = AddResult()
    with store.session() as s:
        seen = set(s.exec(select(Document.content_hash).where(Document.workspace_id == ws.id)))
        for d in docs:
            h = text_hash(d.text)
            if h in seen:
                out.duplicates.append(d.title)
                continue
            seen.add(h)
            doc = Document(
                id=content_id(str(ws.id), h),
                workspace_id=ws.id,
                content_hash=h,
                external_id=d.external_id,
                title=d.title[:500],
                filename=d.filename,
                mime=d.mime,
                n_chars=len(d.text),
                text=d.text,
                meta=dict(d.meta or {}),
            )
            s.add(doc)
            out.added.append(doc)
        s.commit()
    return out
