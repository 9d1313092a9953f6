"""Find a node by its name: the Graph page's search box and the names of "How are X and Y connected?".

A name the analyst typed is matched against entity, document and community titles and ranked:

0. the exact name (case and spacing aside),
1. prefix: names starting with it, or with a word starting with it ("Benson" in "Anna Benson"),
2. names containing it,
3. fuzzy: a name with a word sequence a typo or two away ("Okafur" for "Okafor"), looked for only when the
   tiers above leave room.

Within a tier entities come before documents and communities, then the most mentioned (a community by its size).
HiRAG's summary entities (layer >= 1, titled "X — y") are searched only when the asked `layers` include theirs
(the Graph page's HiRAG-layer filter); with no layers asked, only the extracted entities (layer 0) are, and
`Found.hidden` counts the summary entities left out. Every read names the workspace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from sqlalchemy import func, or_
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from core.models import Community, Document, Node

TIERS = ("exact", "prefix", "contains", "fuzzy")
KIND_ORDER = {"entity": 0, "document": 1, "community": 2}
FUZZY_MIN = 0.78  # similarity (difflib ratio) of the closest word sequence for a fuzzy match
CANDIDATES = 400  # rows of each kind read per tier query (the heaviest first)


@dataclass(frozen=True)
class Match:
    id: str
    kind: str  # entity, document or community
    title: str
    tier: int  # index into TIERS
    weight: float = 0.0  # mentions of an entity, members of a community
    layer: int = 0  # HiRAG layer of an entity
    type: str = ""  # an entity's type, a community's method
    score: float = 1.0  # similarity of a fuzzy match

    @property
    def label(self) -> str:
        """What a picker shows: title · what it is."""
        if self.kind == "entity":
            what = (self.type.lower() or "entity") + (f", summary layer {self.layer}" if self.layer else "")
        elif self.kind == "community":
            what = f"{self.type} community"
        else:
            what = "document"
        return f"{self.title} · {what}"


@dataclass
class Found:
    matches: list[Match] = field(default_factory=list)
    hidden: int = 0  # summary entities whose name matched, left out by the layers asked


def fold(text: str) -> str:
    """Lower case (casefold) with runs of spaces as one."""
    return " ".join((text or "").casefold().split())


def tier_of(query: str, title: str) -> int | None:
    """Rank of `title` for a folded `query` among the exact, prefix and contains tiers; None if none."""
    t = fold(title)
    if not query or query not in t:
        return None
    if t == query:
        return 0
    if re.search(r"(?<!\w)" + re.escape(query), t):
        return 1
    return 2


def similarity(query: str, title: str) -> float:
    """The best difflib ratio between `query` and a run of as many words of `title` as it has (folded)."""
    words = re.findall(r"\w+", fold(title))
    n = max(1, len(query.split()))
    runs = [" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))] or [""]
    return max(SequenceMatcher(None, query, r).ratio() for r in runs)


def _trigrams(query: str, most: int = 8) -> list[str]:
    letters = [w for w in re.findall(r"\w+", query) if len(w) >= 3]
    grams = list(dict.fromkeys(w[i : i + 3] for w in letters for i in range(len(w) - 2)))
    step = max(1, len(grams) // most)
    return grams[::step][:most]


def _rows(s, ws_id: int, kind: str, allowed: tuple[int, ...], cond, limit: int) -> list[Match]:
    """Rows of one kind matching a SQL condition on the title, heaviest first."""
    if kind == "entity":
        q = sa_select(col(Node.id), col(Node.title), col(Node.weight), col(Node.layer), col(Node.type)).where(
            col(Node.workspace_id) == ws_id, col(Node.kind) == "entity", col(Node.layer).in_(allowed),
            cond(col(Node.title)))
        rows = s.connection().execute(q.order_by(col(Node.weight).desc(), col(Node.id)).limit(limit)).all()
        return [Match(i, "entity", t or "", 9, float(w or 0), int(lv or 0), ty or "") for i, t, w, lv, ty in rows]
    if kind == "community":
        cq = select(Community.id, Community.title, Community.size, Community.method).where(
            Community.workspace_id == ws_id, Community.method != "wcc", cond(col(Community.title)))
        rows = s.exec(cq.order_by(col(Community.size).desc(), col(Community.id)).limit(limit)).all()
        return [Match(i, "community", t or "", 9, float(n or 0), 0, m) for i, t, n, m in rows]
    dq = select(Document.id, Document.title).where(Document.workspace_id == ws_id, cond(col(Document.title)))
    return [Match(i, "document", t or "", 9) for i, t in s.exec(dq.order_by(col(Document.id)).limit(limit)).all()]


def search_names(store, ws_id: int, text: str, layers: tuple[int, ...] | list[int] = (), limit: int = 25,
                 kinds: tuple[str, ...] = ("entity", "document", "community")) -> Found:
    """The nodes of `kinds` whose name matches `text`, ranked as the module says, at most `limit`."""
    q = fold(text)
    if not q:
        return Found()
    allowed = tuple(sorted({int(x) for x in layers})) or (0,)
    exact = lambda c: func.lower(c) == func.lower(text.strip())  # noqa: E731 - SQL conditions on a title column
    starts = lambda c: c.istartswith(q, autoescape=True)  # noqa: E731
    contains = lambda c: c.icontains(q, autoescape=True)  # noqa: E731
    found: dict[str, Match] = {}
    with store.session() as s:
        for kind in kinds:
            for cond in (exact, starts, contains):
                for m in _rows(s, ws_id, kind, allowed, cond, CANDIDATES):
                    tier = tier_of(q, m.title)
                    if tier is not None and m.id not in found:
                        found[m.id] = Match(m.id, m.kind, m.title, tier, m.weight, m.layer, m.type)
        if len(found) < limit and len(q.replace(" ", "")) >= 4 and (grams := _trigrams(q)):
            near = lambda c: or_(*(c.icontains(g, autoescape=True) for g in grams))  # noqa: E731
            for kind in kinds:
                for m in _rows(s, ws_id, kind, allowed, near, 3000 if kind == "entity" else 500):
                    score = similarity(q, m.title)
                    if m.id not in found and score >= FUZZY_MIN:
                        found[m.id] = Match(m.id, m.kind, m.title, 3, m.weight, m.layer, m.type, round(score, 3))
        hidden = 0
        if "entity" in kinds:
            hidden = s.exec(select(func.count()).select_from(Node).where(
                Node.workspace_id == ws_id, Node.kind == "entity", col(Node.layer).not_in(allowed),
                col(Node.title).icontains(q, autoescape=True))).one()
    ranked = sorted(found.values(), key=lambda m: (m.tier, -m.score, KIND_ORDER.get(m.kind, 3), -m.weight,
                                                    len(m.title), m.title, m.id))
    return Found(ranked[:limit], int(hidden))


def best_entity(store, ws_id: int, text: str, layers: tuple[int, ...] = ()) -> Match | None:
    """The first-ranked entity for a name, or None."""
    found = search_names(store, ws_id, text, layers, limit=1, kinds=("entity",))
    return found.matches[0] if found.matches else None
