"""Entity-resolution review for the app (the Quality page's "Entity resolution" tab): the merge records as a light
table, filtered and ranked by their evidence, the two entities of a page of rows, and the reviewer's decisions.

A decision that changes the graph (accept, bulk accept, undo of a merge) goes through core/resolution/merge.py: the
graph rows move (or come back), the communities holding either entity are marked stale (or cleared, see merge.py),
the kept entity's vector follows its new text, and the workspace's `build_version` is bumped so every cached view
of the app (keyed by it) reloads. Rejecting and un-rejecting change no graph row and bump nothing; the table's cache
is keyed by `review_stamp` instead. Decisions are refused while a build or a job of the workspace runs (its merge
stage writes the same rows).

The app runs accepts and undos as a merge-decision job in the background worker (core/worker.py: `apply_accepts`
or `apply_undo`, then `reembed_kept`, then the version bump), so the re-embedding shows its progress and never runs in
the page's process; `accept`, `accept_all` and `revert` do the same steps in the caller's process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import col, select

from core.ids import owned
from core.models import Community, Edge, EntityMerge, Node, is_active
from core.resolution.merge import MergeError, merge, reembed, reject, undo, unreject

# status filters offered to the reviewer: label -> (status, auto) with None = any
FILTERS: dict[str, tuple[str | None, bool | None]] = {
    "candidate": ("candidate", None),
    "merged": ("merged", False),
    "auto-merged": ("merged", True),
    "rejected": ("rejected", None),
    "undone": ("undone", None),
    "all": (None, None),
}
# evidence a reviewer can rank by: label -> key of `MergeRow.evidence_values`
RANKS = {"combined score": "score", "name similarity": "name", "type agreement": "type",
         "embedding similarity": "embedding", "shared neighbours": "neighbours"}


@dataclass
class MergeRow:
    """One EntityMerge record without its snapshot (cheap to cache for the ~14k candidates of a large build)."""

    id: int
    kept_id: str
    merged_id: str
    score: float
    status: str
    auto: bool
    evidence: dict

    @property
    def titles(self) -> list[str]:
        return [str(t) for t in (self.evidence.get("titles") or ["", ""])]

    @property
    def label(self) -> str:
        return "merged" if self.status == "merged" and not self.auto else (
            "auto-merged" if self.status == "merged" else self.status)

    def evidence_values(self) -> dict[str, float | None]:
        """The four kinds of evidence and the combined score, each 0-1 (None: not measured, e.g. no vectors)."""
        ev = self.evidence
        types = ev.get("types") or ["", ""]
        t = ev.get("type_agreement")
        if t is None:  # records of older builds: the rule of core/resolution/candidates.py
            generic = {"", "CONCEPT", "UNKNOWN", "OTHER"}
            t = 1.0 if types[0] == types[-1] and types[0] not in generic else (
                0.9 if types[0] in generic or types[-1] in generic else 0.6)
        c = ev.get("cosine")
        return {"score": float(self.score), "name": float(ev.get("name_similarity") or 0.0), "type": float(t),
                "embedding": None if c is None else float(c), "neighbours": float(ev.get("jaccard") or 0.0)}


@dataclass
class Side:
    """One entity of a row as the reviewer sees it: as stored now, or from the merge snapshot once merged away."""

    id: str
    title: str = ""
    type: str = ""
    mentions: float = 0.0
    text: str = ""
    aliases: list[str] = field(default_factory=list)
    exists: bool = True
    alias_counts: dict[str, float] = field(default_factory=dict)  # surface form -> mentions


def merge_table(store, ws_id: int) -> list[MergeRow]:
    """Every merge record of the workspace, best score first."""
    with store.session() as s:
        # sqlmodel's select() stubs type at most four columns; this one reads seven
        rows = s.exec(select(EntityMerge.id, EntityMerge.kept_id, EntityMerge.merged_id,  # type: ignore[call-overload]
                             EntityMerge.score, EntityMerge.status, EntityMerge.auto, EntityMerge.evidence)
                      .where(EntityMerge.workspace_id == ws_id)
                      .order_by(col(EntityMerge.score).desc(), col(EntityMerge.id))).all()
    return [MergeRow(i, k, m, float(sc or 0.0), st, bool(a), dict(ev or {})) for i, k, m, sc, st, a, ev in rows]


def review_stamp(store, ws_id: int) -> tuple:
    """Changes whenever a decision is recorded (keys the app's cache of `merge_table`)."""
    with store.session() as s:
        return tuple(s.exec(select(func.count(), func.max(EntityMerge.decided_at), func.max(EntityMerge.id))
                            .where(EntityMerge.workspace_id == ws_id)).one())


def status_counts(rows: list[MergeRow]) -> dict[str, int]:
    out = {k: 0 for k in FILTERS if k != "all"}
    for r in rows:
        out[r.label] = out.get(r.label, 0) + 1
    return out


def filter_rows(rows: list[MergeRow], status: str = "candidate", query: str = "", rank: str = "combined score",
                min_score: float = 0.0) -> list[MergeRow]:
    """Rows of a status filter (FILTERS), whose names contain `query` (case-insensitive), at or above `min_score`,
    ranked by one kind of evidence (RANKS; unmeasured evidence last), then by score."""
    want, auto = FILTERS[status]
    q = query.strip().casefold()
    key = RANKS[rank]
    out = [r for r in rows if (want is None or r.status == want) and (auto is None or r.auto == auto)
           and r.score >= min_score and (not q or any(q in t.casefold() for t in r.titles))]

    def by_evidence(r: MergeRow) -> tuple[float, float, int]:
        v = r.evidence_values()[key]
        return -(v if v is not None else -1.0), -r.score, r.id

    out.sort(key=by_evidence)
    return out


def sides(store, ws_id: int, rows: list[MergeRow]) -> dict[str, Side]:
    """The entities of `rows` (one page): current rows where they exist, else the snapshot of their merge."""
    ids = {i for r in rows for i in (r.kept_id, r.merged_id)}
    out: dict[str, Side] = {}
    for n in store.nodes_by_id(ws_id, ids).values():
        out[n.id] = _side(n.id, n.title, n.type, n.weight, n.text, n.data)
    missing = [r.id for r in rows if r.merged_id not in out or r.kept_id not in out]
    if missing:
        with store.session() as s:
            for snap in s.exec(select(EntityMerge.snapshot).where(EntityMerge.workspace_id == ws_id,
                                                                   col(EntityMerge.id).in_(missing))):
                for part in ("merged", "kept"):
                    n = (snap or {}).get(part)
                    if n and n["id"] not in out:
                        out[n["id"]] = _side(n["id"], n["title"], n["type"], n["weight"], n["text"], n["data"],
                                             exists=False)
    for r in rows:  # an entity neither stored nor snapshotted (merged away by another record): its recorded name
        for i, k in ((r.kept_id, 0), (r.merged_id, 1)):
            if i not in out:
                out[i] = Side(i, r.titles[k], (r.evidence.get("types") or ["", ""])[k], exists=False)
    return out


def _side(i, title, type_, weight, text, data, exists: bool = True) -> Side:
    counts = {str(a): float(n or 0) for a, n in ((data or {}).get("aliases") or {}).items()}
    aliases = sorted(counts, key=lambda a: (-counts[a], a))
    return Side(i, title or "", type_ or "", float(weight or 0.0), text or "", aliases, exists, counts)


def name_choices(row: MergeRow, sides_: dict[str, Side]) -> tuple[list[str], str, str]:
    """(the names a reviewer may keep for a pair: the kept entity's, then the merged one's; the one a merge would
    give the kept entity by itself: core/resolution/names.py `settle` over both entities' mentions; the one it will
    give: the reviewer's choice (`choose_name`) if any, else that one)."""
    kept, gone = sides_.get(row.kept_id), sides_.get(row.merged_id)
    names = list(dict.fromkeys(t for t in ((kept.title if kept else "") or row.titles[0],
                                           (gone.title if gone else "") or row.titles[1]) if t))
    counts: dict[str, float] = {}
    for side in (kept, gone):
        for a, n in ((side.alias_counts or ({side.title: max(side.mentions, 1.0)} if side.title else {}))
                     if side else {}).items():
            counts[a] = counts.get(a, 0.0) + n
    pinned = (row.evidence.get("keep_name") or "") if row.status != "merged" else ""
    settled = max(counts.items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0] if counts else ""
    settled = settled if settled in names else (names[0] if names else "")
    return names, settled, pinned if pinned in names else settled


def choose_name(store, ws_id: int, merge_id: int, name: str | None) -> None:
    """Record the name the kept entity goes by once candidate `merge_id` is merged (one of the pair's two names;
    None: the one its mentions settle on). Kept in the record's evidence until the merge applies it."""
    with store.session() as s:
        row = owned(s, EntityMerge, ws_id, merge_id)
        if row is None:
            raise MergeError(f"no merge candidate {merge_id} in this workspace")
        if row.status == "merged":
            raise MergeError(f"candidate {merge_id} is merged already; undo it to choose another name")
        ev = dict(row.evidence or {})
        titles = [str(t) for t in (ev.get("titles") or [])]
        current = {n.id: n.title for n in s.exec(select(Node).where(
            Node.workspace_id == ws_id, col(Node.id).in_([row.kept_id, row.merged_id])))}
        allowed = set(titles) | {t for t in current.values() if t}
        if name is not None and name not in allowed:
            raise MergeError(f"“{name}” is not a name of this pair")
        if name is None:
            ev.pop("keep_name", None)
        else:
            ev["keep_name"] = name
        if ev != (row.evidence or {}):
            row.evidence = ev
            s.add(row)
            s.commit()


def shared_documents(store, ws_id: int, rows: list[MergeRow]) -> dict[int, int]:
    """Per row (one page), how many documents mention both of its entities (their chunks' `mentions` edges; an entity
    merged away has none left, so a merged row counts 0)."""
    ids = sorted({i for r in rows for i in (r.kept_id, r.merged_id)})
    docs: dict[str, set[str]] = {}
    if ids:
        with store.session() as s:
            for ent, doc in s.exec(select(Edge.dst, Node.document_id).join(Node, col(Node.id) == Edge.src).where(
                    Edge.workspace_id == ws_id, Edge.kind == "mentions", col(Edge.dst).in_(ids),
                    Node.workspace_id == ws_id, Node.kind == "chunk")):
                if doc:
                    docs.setdefault(ent, set()).add(doc)
    return {r.id: len(docs.get(r.kept_id, set()) & docs.get(r.merged_id, set())) for r in rows}


def build_running(store, ws_id: int) -> bool:
    """A build or a job (core/worker.py: a promote, a what-if run, a merge decision) of the workspace holds it:
    decisions wait for it. A run whose worker went silent does not (`is_active`): the next run supersedes it, so
    it must not hold decisions back either."""
    run = store.latest_run(ws_id)
    return run is not None and is_active(run, store.now())


def communities_of(store, ws_id: int, entity_ids: list[str]) -> list[str]:
    with store.session() as s:
        return sorted(set(s.exec(select(Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "in_community",
                                                        col(Edge.src).in_(entity_ids)))))


def _guard(store, ws_id: int) -> None:
    if build_running(store, ws_id):
        raise MergeError("a build or job of this workspace is running; decide once it has finished")


# -- the steps of a decision, without the guard: the merge-decision job (core/worker.py) runs them ----------------
def apply_accepts(store, ws_id: int, merge_ids: list[int], index) -> Iterator[tuple[int, str | MergeError]]:
    """Merge the records best score first; yields (record id, kept entity id) per merge, or (record id, the
    MergeError) for one an earlier merge made impossible. The kept entities' vectors are not rewritten here
    (`reembed_kept`)."""
    with store.session() as s:
        rows = s.exec(select(EntityMerge.id, EntityMerge.score, EntityMerge.kept_id)
                      .where(EntityMerge.workspace_id == ws_id,
                             col(EntityMerge.id).in_(merge_ids))).all()
    for mid, _, kept in sorted(rows, key=lambda r: (-(r[1] or 0.0), r[0])):
        try:
            merge(store, ws_id, mid, index)
        except MergeError as exc:
            yield mid, exc
            continue
        yield mid, kept


def apply_undo(store, ws_id: int, merge_id: int, index) -> list[str]:
    """Undo merge `merge_id` (graph rows and both vectors from its snapshot); returns the kept entity's id, whose
    vector `reembed_kept` rewrites only when the snapshot's no longer matches its text."""
    with store.session() as s:
        row = owned(s, EntityMerge, ws_id, merge_id)
        kept = row.kept_id if row is not None else None
    undo(store, ws_id, merge_id, index)
    return [kept] if kept else []


def kept_of_merges(store, ws_id: int) -> list[str]:
    """The kept entities of the workspace's merged records."""
    with store.session() as s:
        return sorted(set(s.exec(select(EntityMerge.kept_id).where(EntityMerge.workspace_id == ws_id,
                                                                   EntityMerge.status == "merged"))))


def reembed_kept(store, ws_id: int, index, embedder, kept: list[str]) -> list[str]:
    """Re-embed the kept entities still in the graph whose stored vector no longer matches their text."""
    if not kept:
        return []
    with store.session() as s:
        alive = list(s.exec(select(Node.id).where(Node.workspace_id == ws_id, col(Node.id).in_(sorted(set(kept))))))
    return reembed(store, index, embedder, alive)


# -- decisions in the caller's process (the CLI, the tests) ----------------------------------------------------------
def accept(store, ws_id: int, merge_id: int, index, embedder) -> tuple[str, list[str]]:
    """Merge one candidate (re-embedding the kept entity), bump the version. Returns (kept id, stale community ids)."""
    _guard(store, ws_id)
    merge(store, ws_id, merge_id, index)
    with store.session() as s:
        row = owned(s, EntityMerge, ws_id, merge_id)
        assert row is not None  # merged just now, in this workspace
        kept = row.kept_id
    reembed_kept(store, ws_id, index, embedder, [kept])
    store.bump_version(ws_id)
    return kept, communities_of(store, ws_id, [kept])


def accept_all(store, ws_id: int, rows: list[MergeRow], index, embedder) -> tuple[int, list[tuple[MergeRow, str]]]:
    """Merge `rows` best score first, skipping (with the reason) those the earlier ones made impossible (an entity
    merged away meanwhile); one re-embedding and one version bump at the end. Returns (merged, skipped)."""
    _guard(store, ws_id)
    by_id = {r.id: r for r in rows}
    kept, skipped = [], []
    for mid, outcome in apply_accepts(store, ws_id, list(by_id), index):
        if isinstance(outcome, MergeError):
            skipped.append((by_id[mid], str(outcome)))
        else:
            kept.append(outcome)
    if kept:
        reembed_kept(store, ws_id, index, embedder, kept)
        store.bump_version(ws_id)
    return len(kept), skipped


def decline(store, ws_id: int, merge_id: int) -> None:
    """Reject a candidate (remembered: no build proposes it again)."""
    _guard(store, ws_id)
    reject(store, ws_id, merge_id)


def record_status(store, ws_id: int, merge_id: int) -> str | None:
    with store.session() as s:
        row = owned(s, EntityMerge, ws_id, merge_id)
        return row.status if row is not None else None


def revert(store, ws_id: int, merge_id: int, index, embedder) -> str:
    """Undo the decision on a record: a merge is undone (graph, vectors, stale marks; version bumped), a rejection
    returns the pair to the candidates. Returns the record's new status."""
    _guard(store, ws_id)
    if record_status(store, ws_id, merge_id) == "rejected":
        unreject(store, ws_id, merge_id)
        return "candidate"
    reembed_kept(store, ws_id, index, embedder, apply_undo(store, ws_id, merge_id, index))
    store.bump_version(ws_id)
    return "undone"


def stale_reasons(store, ws_id: int, community_id: str) -> list[str]:
    """Why a community's report is stale, one line per merge or undo since it was written (empty: not stale)."""
    with store.session() as s:
        c = owned(s, Community, ws_id, community_id)
    data = (c.data or {}) if c is not None else {}
    if not data.get("stale"):
        return []
    out = []
    for r in data.get("stale_reasons") or [{}]:
        if r.get("action") == "merge":
            out.append(f"“{r.get('merged', '?')}” merged into “{r.get('kept', '?')}”")
        elif r.get("action") == "undo":
            out.append(f"merge of “{r.get('merged', '?')}” into “{r.get('kept', '?')}” undone")
        else:
            out.append("its members changed")
    return out
