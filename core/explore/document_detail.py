"""One document as the Workspaces page opens it: its text, the entities its passages mention, the communities those
entities fall in, and what it contributed to the graph: its chunks, statements and topics, the relationships
derived from its chunks, the entities it introduced (no document added before it mentions them) and those only it
mentions.

Every read is scoped to the workspace: the document is looked up with `owned` (an id from the browser that is not a
document of this workspace opens nothing), and every other row is read with `workspace_id ==`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import col, select

from core.ids import owned
from core.models import Community, Document, Edge, Node

_PART = 500


@dataclass
class DocEntity:
    id: str
    title: str
    type: str
    passages: int  # chunks of this document that mention it
    documents: int  # documents that mention it, this one included
    introduced: bool  # no document added before this one mentions it


@dataclass
class DocCommunity:
    id: str
    method: str
    level: int
    title: str
    size: int
    members_here: int  # of its members, those this document mentions


@dataclass
class DocumentDetail:
    id: str
    title: str
    filename: str
    external_id: str | None
    n_chars: int
    created_at: datetime
    text: str
    chunks: int = 0
    statements: int = 0
    topics: int = 0
    relationships: int = 0
    entities: list[DocEntity] = field(default_factory=list)  # most passages first
    communities: list[DocCommunity] = field(default_factory=list)  # per method, most members here first

    @property
    def introduced(self) -> list[DocEntity]:
        return [e for e in self.entities if e.introduced]

    @property
    def only_here(self) -> list[DocEntity]:
        return [e for e in self.entities if e.documents == 1]


def _parts(s, make: Callable, ids: Iterable[str]) -> list:
    ids = sorted(set(ids))
    out: list = []
    for off in range(0, len(ids), _PART):
        out += list(s.exec(make(ids[off : off + _PART])))
    return out


def document_detail(store, ws_id: int, doc_id: str) -> DocumentDetail | None:
    """The document `doc_id` of workspace `ws_id` with what it holds and contributed; None when the workspace has no
    such document."""
    with store.session() as s:
        doc = owned(s, Document, ws_id, doc_id)
        if doc is None:
            return None
        out = DocumentDetail(doc.id, doc.title, doc.filename, doc.external_id, doc.n_chars, doc.created_at, doc.text)
        own = s.exec(select(Node.id, Node.kind).where(Node.workspace_id == ws_id, Node.document_id == doc.id,
                                                      col(Node.kind).in_(("chunk", "statement", "topic")))).all()
        chunks = [i for i, k in own if k == "chunk"]
        out.chunks, out.statements = len(chunks), sum(k == "statement" for _, k in own)
        out.topics = sum(k == "topic" for _, k in own)
        if not chunks:
            return out
        out.relationships = len(set(_parts(s, lambda p: select(Edge.src).join(Node, col(Node.id) == Edge.src).where(
            Edge.workspace_id == ws_id, Edge.kind == "derived_from", col(Edge.dst).in_(p),
            Node.workspace_id == ws_id, Node.kind == "relationship"), chunks)))
        here: dict[str, int] = {}
        for _, ent in _parts(s, lambda p: select(Edge.src, Edge.dst).where(
                Edge.workspace_id == ws_id, Edge.kind == "mentions", col(Edge.src).in_(p)), chunks):
            here[ent] = here.get(ent, 0) + 1
        ents = {i: (t, ty) for i, t, ty in _parts(s, lambda p: select(Node.id, Node.title, Node.type).where(
            Node.workspace_id == ws_id, Node.kind == "entity", col(Node.id).in_(p)), here)}
        docs_of: dict[str, set[str]] = {}
        for ent, d in _parts(s, lambda p: select(Edge.dst, Node.document_id).join(Node, col(Node.id) == Edge.src)
                             .where(Edge.workspace_id == ws_id, Edge.kind == "mentions", col(Edge.dst).in_(p),
                                    Node.workspace_id == ws_id, Node.kind == "chunk"), ents):
            if d:
                docs_of.setdefault(ent, set()).add(d)
        added = dict(_parts(s, lambda p: select(Document.id, Document.created_at).where(
            Document.workspace_id == ws_id, col(Document.id).in_(p)), {d for ds in docs_of.values() for d in ds}))
        mine = (doc.created_at, doc.id)
        out.entities = sorted(
            (DocEntity(e, t or e, ty or "", here[e], len(docs_of.get(e, {doc.id})),
                       all((added.get(d, doc.created_at), d) >= mine for d in docs_of.get(e, ())))
             for e, (t, ty) in ents.items()),
            key=lambda x: (-x.passages, x.title.casefold(), x.id))
        members: dict[str, int] = {}
        for _, cid in _parts(s, lambda p: select(Edge.src, Edge.dst).where(
                Edge.workspace_id == ws_id, Edge.kind == "in_community", col(Edge.src).in_(p)), ents):
            members[cid] = members.get(cid, 0) + 1
        # sqlmodel's select() stubs type at most four columns; this one reads five
        comms = _parts(s, lambda p: select(Community.id, Community.method, Community.level,  # type: ignore[call-overload]
                                           Community.title, Community.size).where(Community.workspace_id == ws_id,
                                                                 col(Community.id).in_(p),
                                                                 Community.method != "wcc"), members)
    out.communities = sorted((DocCommunity(i, m, int(lv), t or "", int(sz or 0), members[i])
                              for i, m, lv, t, sz in comms),
                             key=lambda c: (c.method, -c.members_here, c.level, c.title, c.id))
    return out
