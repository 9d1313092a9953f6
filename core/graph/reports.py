"""Community reports: a title, summary, findings with importance ratings and keywords for every community.

The material of a report is its members' descriptions (most-mentioned first) and the descriptions of the
relationships inside it (strongest first), capped so a prompt stays within the model's context.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from sqlmodel import select

from core.backends.base import Report
from core.extract.text import truncate
from core.models import Community, Edge, Node

MAX_ENTITIES = 30
MAX_RELATIONSHIPS = 40


def report_material(members: list[Node], rels: list[Node]) -> tuple[str, list[str]]:
    """(title hint, material lines) for a community with these member entities and inner relationships."""
    members = sorted(members, key=lambda n: (-n.weight, n.title))
    rels = sorted(rels, key=lambda n: (-n.weight, n.title))
    hint = "; ".join(n.title for n in members[:3])
    lines = [f"{n.title} ({n.type}): {truncate(n.text, 400)}" for n in members[:MAX_ENTITIES]]
    lines += [f"{r.title}: {truncate(r.text, 300)}" for r in rels[:MAX_RELATIONSHIPS]]
    return hint, lines


def reports_stage(ctx) -> Iterator:
    from core.pipeline import Progress

    store, ws = ctx.store, ctx.ws
    with store.session() as s:
        todo = list(s.exec(select(Community.id).where(Community.workspace_id == ws.id, Community.summary == "")
                           .order_by(Community.method, Community.level, Community.id)))
    total = len(todo)
    workers = ctx.settings.backend.concurrency if ctx.backend.name == "ollama" else 1
    batch = max(8, workers * 4)

    def build(cid: str) -> tuple[str, Report]:
        members, rels = community_elements(store, ws.id, cid)
        hint, material = report_material(members, rels)
        return cid, ctx.backend.report(hint, material)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for off in range(0, total, batch):
            part = todo[off : off + batch]
            results = list(pool.map(build, part)) if workers > 1 else [build(c) for c in part]
            with store.session() as s:
                for cid, rep in results:
                    c = s.get(Community, cid)
                    c.title = rep.title[:300]
                    c.summary = rep.summary
                    c.report = rep.model_dump()
                    s.add(c)
                s.commit()
            yield Progress(off + len(part), total, f"{off + len(part)}/{total} reports", {"reports": off + len(part)})
            if ctx.should_stop():
                return
    if total == 0:
        yield Progress(0, 0, "all reports present", {})


def community_elements(store, ws_id: int, cid: str) -> tuple[list[Node], list[Node]]:
    """A community's member entities and the relationships between two of its members."""
    with store.session() as s:
        member_ids = set(s.exec(select(Edge.src).where(Edge.workspace_id == ws_id, Edge.kind == "in_community",
                                                       Edge.dst == cid)))
        members = []
        ids = list(member_ids)
        for i in range(0, len(ids), 500):
            members += list(s.exec(select(Node).where(Node.id.in_(ids[i : i + 500]))))  # type: ignore[union-attr]
        ends: dict[str, set[str]] = defaultdict(set)
        for i in range(0, len(ids), 500):
            for src, dst in s.exec(select(Edge.src, Edge.dst).where(
                    Edge.workspace_id == ws_id, Edge.kind.in_(("subject", "object")),  # type: ignore[attr-defined]
                    Edge.dst.in_(ids[i : i + 500]))):  # type: ignore[attr-defined]
                ends[src].add(dst)
        inner = [r for r, e in ends.items() if len(e) == 2]
        rels = []
        for i in range(0, len(inner), 500):
            rels += list(s.exec(select(Node).where(Node.id.in_(inner[i : i + 500]))))  # type: ignore[union-attr]
    return members, rels
