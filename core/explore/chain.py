"""The evidence chain: the shortest connection on the entity graph from the entities the question names to those
the answer's evidence names, ending at the documents the evidence is quoted from.

"What team was Anna Benson's husband on?": the question names Anna Benson; the evidence's last sentence names the
Pittsburgh Pirates; the chain is Anna Benson —married→ Kris Benson —played for→ Pittsburgh Pirates, each link an
extracted relationship (its predicate as the label), then the cited documents. Names are matched as whole words
(`Resources.names`: extracted entities, layer 0; a CONCEPT, a common noun phrase, only when nothing else is named),
the search is breadth first over the extracted relationships (HiRAG's summary entities are not evidence), at most
`MAX_HOPS` links, and among equally short paths the one through the entities the evidence names. Evidence of two
hops (`Evidence.via`, the name the first sentence hands to the second) is followed through that name: question →
bridge → answer, even where a shorter link skips the bridge. A few nodes, drawn
small beside the answer (`chain_payload`); the strategy's whole path stays in core/explore/route.py.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from core.explore.drawing import canvas_payload
from core.explore.evidence import Evidence, asked_term, norm, terms
from core.text import norm_key, truncate

MAX_HOPS = 4
_JOINS = {"of", "the", "and", "de", "du", "von", "van", "der", "la", "le", "&"}
MAX_VISITED = 100_000  # entities a search reads before it gives up (a hub of a huge workspace)
COLORS = {"question": "#D62828", "bridge": "#003049", "answer": "#E9A800", "source": "#2B9348"}
SHAPES = {"question": "star", "bridge": "dot", "answer": "hexagon", "source": "box"}


@dataclass
class ChainNode:
    id: str
    kind: str  # entity or document
    label: str
    role: str  # question, bridge, answer (entities along the chain), source (a cited document)
    cite: int | None = None


@dataclass
class ChainEdge:
    src: str
    dst: str
    label: str


@dataclass
class Chain:
    nodes: list[ChainNode] = field(default_factory=list)
    edges: list[ChainEdge] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict:
        return {"nodes": [asdict(n) for n in self.nodes], "edges": [asdict(e) for e in self.edges],
                "note": self.note}

    @classmethod
    def from_dict(cls, d: dict | None) -> Chain:
        d = d or {}
        return cls([ChainNode(**n) for n in d.get("nodes", [])], [ChainEdge(**e) for e in d.get("edges", [])],
                   str(d.get("note", "")))

    def line(self) -> str:
        """The chain as one line of plain text: `A —married→ B —played for→ C` (entities no relationship joins
        apart, after a ·)."""
        ents = {n.id: n for n in self.nodes if n.kind == "entity"}
        nxt = {e.src: e for e in self.edges if e.src in ents and e.dst in ents}
        heads = [n for n in ents.values() if n.id not in {e.dst for e in nxt.values()}]
        parts = []
        for h in heads:
            out, at, seen = h.label, h.id, {h.id}
            while at in nxt and nxt[at].dst not in seen:
                e = nxt[at]
                out += f" —{e.label}→ {ents[e.dst].label}"
                at = e.dst
                seen.add(at)
            parts.append(out)
        return " · ".join(parts)


def named_entities(res, text: str, titles: Iterable[str] = ()) -> list[str]:
    """Extracted entities (layer 0) that `text` names, most telling first (`ranked_names`)."""
    return [e for e, _ in ranked_names(res, text, titles)]


def ranked_names(res, text: str, titles: Iterable[str] = ()) -> list[tuple[str, tuple]]:
    """(entity, rank) of the extracted entities (layer 0) `text` names, most telling first: written capitalised
    there (a name only mentioned in lower case, "rock band", is a common noun), a retrieved document's title
    (`titles`) before others, longer names before shorter, a single word used as an adjective ("Danish plant
    ecologist") last; concepts (common noun phrases) only when nothing else is named. Equal ranks name equally."""
    view = res.view
    docs = {norm_key(t) for t in titles}
    toks = [(m.group(), m.end()) for m in re.finditer(r"[\w'’\-]+", text)]
    keys = [norm_key(t) for t, _ in toks]
    scored: dict[str, tuple] = {}
    where: dict[str, int] = {}
    for key, ids in res.names.find(text):
        words = key.split()
        at = next((i for i in range(len(keys) - len(words) + 1) if keys[i:i + len(words)] == words), None)
        if at is None:
            continue
        span = [t for t, _ in toks[at:at + len(words)]]
        capital = all(w[:1].isupper() or not w[:1].isalpha() or w.lower() in _JOINS for w in span)
        after = text[toks[at + len(words) - 1][1]:]
        adjective = len(words) == 1 and bool(re.match(r"\s+[a-z]", after))
        for e in ids:
            n = view.entities.get(e)
            if n is None or n.layer or e not in view.eg.index:
                continue
            concept = (n.type or "").upper() == "CONCEPT"
            scored.setdefault(e, (concept, not capital, adjective, key not in docs, -len(words)))
            where.setdefault(e, at)
    ranked = sorted(scored, key=lambda e: (scored[e], where[e], e))
    good = [e for e in ranked if not scored[e][0] and not scored[e][1]] or ranked
    return [(e, scored[e]) for e in good]


def evidence_chain(res, question: str, evidence: list[Evidence], titles: Iterable[str] = ()) -> Chain:
    """The chain from the question's entities to the evidence's (module doc); a note says why when there is none.
    `titles`: the retrieved documents' titles (a question's name that titles one is its subject)."""
    if not evidence:
        return Chain(note="No evidence to connect.")
    view = res.view
    titles = list(titles)
    ranked = ranked_names(res, question, titles)
    named = [e for e, _ in ranked]
    start = [e for e, rank in ranked if rank == ranked[0][1]][:3]  # the most telling names, equally
    said = [named_entities(res, e.sentence, titles) for e in evidence]
    targets = [e for e in said[-1] if e not in named]  # none: the evidence names the question's own entities
    asked = asked_term(question)  # "Which university …": a name holding "university" first
    targets.sort(key=lambda e: asked not in terms(view.entities[e].title))
    docs = [ChainNode(e.document_id, "document", e.title, "source", e.cite) for e in evidence]
    if not start:
        return Chain(docs, [], "The question names no entity of the graph.")
    prefer = {e for s in said for e in s}
    via = [e for ev in evidence if ev.via for e in named_entities(res, ev.via, titles) if e not in named]
    path: list[str] = []
    if via and targets:  # two hops of evidence: through the name the first sentence hands to the second
        first = _search(view, start, via, prefer)
        second = _search(view, first[-1:], [t for t in targets if t not in first], prefer) if first else []
        if second and not set(second[1:]) & set(first):
            path = first + second[1:]
    if not path and targets:
        path = _search(view, start, targets, prefer)
    note = "" if path or not targets else (
        f"No chain of at most {MAX_HOPS} relationships joins the question's entities to the evidence's.")
    roles = ["question"] + ["bridge"] * (len(path) - 2) + (["answer"] if len(path) > 1 else [])
    nodes = [ChainNode(e, "entity", view.entities[e].title, role) for e, role in zip(path, roles)]
    edges = [ChainEdge(a, b, _predicate(view, a, b, evidence)) for a, b in zip(path, path[1:])]
    drawn = set(path)
    for ev, names, doc in zip(evidence, said, docs):
        at = next((e for e in reversed(path) if e in names), None)
        if at is None:  # the sentence names none of the chain: the question's entity it names, else the chain's end
            at = next((e for e in names if e in named), None) or (path[-1] if path and ev.hop > 1 else start[0])
        if at not in drawn:
            drawn.add(at)
            nodes.append(ChainNode(at, "entity", view.entities[at].title, "question" if at in named else "answer"))
        if doc.id not in drawn:
            drawn.add(doc.id)
            nodes.append(doc)
        edges.append(ChainEdge(at, doc.id, f"in [{doc.cite}]" if doc.cite else "in"))
    return Chain(nodes, edges, note)


def _search(view, start: list[str], targets: list[str], prefer: set[str]) -> list[str]:
    """Entity ids of a shortest path (breadth first over layer-0 entities, at most MAX_HOPS links) from any of
    `start` to any of `targets`, through entities of `prefer` where paths tie; [] when none is that near."""
    idx, ids, layer = view.eg.index, view.eg.ids, view.eg.layer
    goal = {idx[t]: k for k, t in enumerate(targets) if t in idx}
    frontier = [idx[s] for s in start if s in idx]
    preds: dict[int, list[int]] = {v: [] for v in frontier}
    hits: list[int] = [v for v in frontier if v in goal]
    for _ in range(MAX_HOPS):
        if hits or not frontier or len(preds) > MAX_VISITED:
            break
        nxt: list[int] = []
        level: set[int] = set()
        for v in frontier:
            for u in view.g.neighbors(v):
                if layer and layer[u]:
                    continue
                if u not in preds:
                    preds[u] = [v]
                    nxt.append(u)
                    level.add(u)
                elif u in level and v not in preds[u]:
                    preds[u].append(v)
        hits = [u for u in nxt if u in goal]
        frontier = nxt
    if not hits:
        return []
    v = min(hits, key=lambda u: (goal[u], ids[u]))
    path = [v]
    while preds[v]:
        v = min(preds[v], key=lambda u: (ids[u] not in prefer, ids[u]))
        path.append(v)
    return [ids[u] for u in reversed(path)]


def _predicate(view, a: str, b: str, evidence: list[Evidence]) -> str:
    """The predicate of the relationship linking a and b: the one whose sentence the evidence quotes first."""
    rels = [view.relationships[r] for r in view.relationships_between(a, b) if r in view.relationships]
    if not rels:
        return "related to"
    quoted = [norm(e.sentence) for e in evidence]
    rel = min(rels, key=lambda n: (not any(norm(n.text or "") in q or q in norm(n.text or "") for q in quoted),
                                   n.id))
    parts = (rel.title or "").split(" — ")
    return parts[1] if len(parts) == 3 and parts[1] else "related to"


def chain_payload(chain: Chain, height: int = 190) -> dict:
    """The canvas component's payload for `chain`: the entities in a row, left to right, each cited document
    under the entity its sentence names; fixed places, no physics."""
    ents = [n for n in chain.nodes if n.kind == "entity"]
    x = {n.id: i * 230.0 for i, n in enumerate(ents)}
    under: dict[str, int] = {}
    place: dict[str, tuple[float, float]] = {n.id: (x[n.id], 0.0) for n in ents}
    for e in chain.edges:
        if e.dst not in place and e.src in x:
            k = under.get(e.src, 0)
            under[e.src] = k + 1
            place[e.dst] = (x[e.src] + 150.0 * k, 110.0)
    for i, n in enumerate(chain.nodes):
        place.setdefault(n.id, (230.0 * i, 110.0))
    nodes = []
    for n in chain.nodes:
        color = COLORS.get(n.role, "#999999")
        label = (f"[{n.cite}] " if n.cite else "") + truncate(n.label, 30)
        tip = html.escape(f"{n.label} · {n.kind} · {n.role}")
        nodes.append({"id": n.id, "label": label, "title": tip, "shape": SHAPES.get(n.role, "dot"),
                      "size": 16, "kind": n.kind, "role": n.role, "roles": [n.role],
                      "x": place[n.id][0], "y": place[n.id][1],
                      "color": {"background": color if n.kind == "entity" else "#E8F5E9", "border": color,
                                "highlight": {"background": color, "border": "#000000"}},
                      "font": {"size": 15, "color": "#222222"}, "borderWidth": 2})
    edges = [{"from": e.src, "to": e.dst, "label": truncate(e.label, 40), "title": html.escape(e.label),
              "arrows": "to", "color": "#555555", "width": 1.5,
              "font": {"size": 12, "align": "horizontal" if e.label.startswith("in") else "top"},
              "role": "chain"} for e in chain.edges]
    options = {"physics": {"enabled": False}, "edges": {"smooth": False},
               "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": False}}
    return canvas_payload(nodes, edges, options, height)
