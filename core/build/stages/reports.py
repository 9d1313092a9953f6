"""Community reports: a title, summary, findings with importance ratings and keywords for every community.

The material of a report is its members' descriptions (most-mentioned first) and the descriptions of the
relationships inside it (strongest first), capped so a prompt stays within the model's context. The stage writes
the reports still missing and rewrites those marked stale by an entity merge or undo since they were written
(core/resolution/merge.py `mark_stale`), clearing the mark.

The communities reported are those whose paper reports them: GraphRAG's `leiden` (§2: a report per community of
every level), HiRAG's `hirag` (hirag.txt §4.1: "for each community p in P, we generate an interpretable semantic
report") and ArchRAG's `attributed` (its stage writes them as it goes; any still missing are written here). The
`wcc` components GraphRAG clusters from, and NodeRAG's own communities (summarized by its high-level elements in
the augment stage, noderag.txt §2.3), get none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import bindparam, func, or_, update
from sqlmodel import select

from core.backends.base import Report
from core.models import Community, Edge, Node
from core.store import release_memory
from core.text import truncate

MAX_ENTITIES = 30
MAX_RELATIONSHIPS = 40
REPORTED = ("leiden", "hirag", "attributed")


def report_material(members: list, rels: list) -> tuple[str, list[str]]:
    """(title hint, material lines) for a community with these member entities and inner relationships."""
    members = sorted(members, key=lambda n: (-n.weight, n.title))
    rels = sorted(rels, key=lambda n: (-n.weight, n.title))
    hint = "; ".join(n.title for n in members[:3])
    lines = [f"{n.title} ({n.type}): {truncate(n.text, 400)}" for n in members[:MAX_ENTITIES]]
    lines += [f"{r.title}: {truncate(r.text, 300)}" for r in rels[:MAX_RELATIONSHIPS]]
    return hint, lines


@dataclass
class Element:
    title: str
    type: str
    text: str
    weight: float


class CommunityElements:
    """Members and inner relationships of every community, loaded once for the whole reports stage."""

    def __init__(self, store, ws_id: int):
        with store.session() as s:
            self.members: dict[str, list[str]] = defaultdict(list)
            for src, dst in s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id,
                                                                    Edge.kind == "in_community")):
                self.members[dst].append(src)
            self.nodes = {i: Element(t, ty, x, w) for i, t, ty, x, w in s.exec(
                select(Node.id, Node.title, Node.type, Node.text, Node.weight).where(
                    Node.workspace_id == ws_id, Node.kind.in_(("entity", "relationship"))))}  # type: ignore[attr-defined]
            self.ends: dict[str, set[str]] = defaultdict(set)
            self.rels_of: dict[str, list[str]] = defaultdict(list)
            for src, dst in s.exec(select(Edge.src, Edge.dst).where(
                    Edge.workspace_id == ws_id, Edge.kind.in_(("subject", "object")))):  # type: ignore[attr-defined]
                self.ends[src].add(dst)
                self.rels_of[dst].append(src)

    def of(self, cid: str) -> tuple[list[Element], list[Element]]:
        member_ids = set(self.members.get(cid, []))
        members = [self.nodes[m] for m in member_ids if m in self.nodes]
        inner = {r for m in member_ids for r in self.rels_of.get(m, []) if self.ends[r] <= member_ids}
        return members, [self.nodes[r] for r in inner if r in self.nodes]


def reports_stage(ctx) -> Iterator:
    from core.build.context import Progress

    store, ws = ctx.store, ctx.ws
    with store.session() as s:  # no report yet, or a report written before entity merges changed its members
        stale = func.json_extract(Community.data, "$.stale")
        rows = s.exec(select(Community.id, Community.data).where(
            Community.workspace_id == ws.id, Community.method.in_(REPORTED),  # type: ignore[attr-defined]
            or_(Community.summary == "", stale.is_not(None)))
            .order_by(Community.method, Community.level, Community.id)).all()
        # a stale mark on a community without a report (a wcc component, NodeRAG's) has nothing to rewrite: cleared
        bare = s.exec(select(Community.id, Community.data).where(
            Community.workspace_id == ws.id, Community.method.not_in(REPORTED),  # type: ignore[attr-defined]
            Community.summary == "", stale.is_not(None))).all()
    if bare:
        table = Community.__table__  # type: ignore[attr-defined]
        with store.session() as s:
            s.connection().execute(update(table).where(table.c.id == bindparam("_id")), [
                {"_id": cid, "data": {k: v for k, v in (data or {}).items() if k not in ("stale", "stale_reasons")}}
                for cid, data in bare])
            s.commit()
    todo = [cid for cid, _ in rows]
    fresh = {cid: {k: v for k, v in (data or {}).items() if k not in ("stale", "stale_reasons")} for cid, data in rows}
    total = len(todo)
    if total == 0:
        yield Progress(0, 0, "all reports present", {})
        return
    elements = CommunityElements(store, ws.id)
    workers = ctx.settings.backend.concurrency if ctx.backend.name == "ollama" else 1
    batch = max(32, workers * 4) if workers > 1 else 256  # reports written per transaction
    table = Community.__table__  # type: ignore[attr-defined]

    def build(cid: str) -> tuple[str, Report]:
        hint, material = report_material(*elements.of(cid))
        return cid, ctx.backend.report(hint, material)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for off in range(0, total, batch):
            part = todo[off : off + batch]
            results = list(pool.map(build, part)) if workers > 1 else [build(c) for c in part]
            with store.session() as s:
                s.connection().execute(update(table).where(table.c.id == bindparam("_id")), [
                    {"_id": cid, "title": rep.title[:300], "summary": rep.summary, "report": rep.model_dump(),
                     "data": fresh[cid]}
                    for cid, rep in results])
                s.commit()
            yield Progress(off + len(part), total, f"{off + len(part)}/{total} reports", {"reports": off + len(part)})
            if ctx.should_stop():
                return
    elements = None  # drop the loaded graph before handing memory back
    release_memory()

