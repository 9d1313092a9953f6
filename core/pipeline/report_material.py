"""What a community report is written from (shared by the `reports` and `attributed` stages and the index stage's
choice of what to embed): the methods whose communities get a report, and the material of one report.

The material of a report is its members' descriptions (most-mentioned first) and the descriptions of the
relationships inside it (strongest first), capped so a prompt stays within the model's context.

The communities reported are those whose paper reports them: GraphRAG's `leiden` (§2: a report per community of
every level), HiRAG's `hirag` (hirag.txt §4.1: "for each community p in P, we generate an interpretable semantic
report") and ArchRAG's `attributed` (its stage writes them as it goes; any still missing are written by the
`reports` stage). The `wcc` components GraphRAG clusters from, and NodeRAG's own communities (summarized by its
high-level elements in the augment stage, noderag.txt §2.3), get none.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlmodel import col, select

from core.models import Edge, Node
from core.store import content_id
from core.text import truncate

MAX_ENTITIES = 30
MAX_RELATIONSHIPS = 40
REPORTED = ("leiden", "hirag", "attributed")
HASHED = ("leiden", "hirag")  # reports the reports stage keeps by material hash (attributed: its own stage does)


def report_material(members: list, rels: list) -> tuple[str, list[str]]:
    """(title hint, material lines) for a community with these member entities and inner relationships."""
    members = sorted(members, key=lambda n: (-n.weight, n.title))
    rels = sorted(rels, key=lambda n: (-n.weight, n.title))
    hint = "; ".join(n.title for n in members[:3])
    lines = [f"{n.title} ({n.type}): {truncate(n.text, 400)}" for n in members[:MAX_ENTITIES]]
    lines += [f"{r.title}: {truncate(r.text, 300)}" for r in rels[:MAX_RELATIONSHIPS]]
    return hint, lines


def material_hash(members: list, rels: list) -> str:
    """The hash of what a report is written from: a stored report with the same hash needs no new one."""
    hint, lines = report_material(members, rels)
    return content_id(hint, *lines)


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
            # sqlmodel types select() for at most 4 columns, hence the ignore
            self.nodes = {i: Element(t, ty, x, w) for i, t, ty, x, w in s.exec(
                select(Node.id, Node.title, Node.type, Node.text, Node.weight).where(  # type: ignore[call-overload]
                    Node.workspace_id == ws_id, col(Node.kind).in_(("entity", "relationship"))))}
            self.ends: dict[str, set[str]] = defaultdict(set)
            self.rels_of: dict[str, list[str]] = defaultdict(list)
            for src, dst in s.exec(select(Edge.src, Edge.dst).where(
                    Edge.workspace_id == ws_id, col(Edge.kind).in_(("subject", "object")))):
                self.ends[src].add(dst)
                self.rels_of[dst].append(src)

    def of(self, cid: str) -> tuple[list[Element], list[Element]]:
        member_ids = set(self.members.get(cid, []))
        members = [self.nodes[m] for m in sorted(member_ids) if m in self.nodes]  # ties keep id order
        inner = {r for m in member_ids for r in self.rels_of.get(m, []) if self.ends[r] <= member_ids}
        return members, [self.nodes[r] for r in sorted(inner) if r in self.nodes]
