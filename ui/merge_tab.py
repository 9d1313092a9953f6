"""The Quality page's "Entity resolution" tab: merge candidates ranked by their evidence, as a compact table of one
line per pair (the two entities, their evidence in figures, the name the merged entity will go by, Merge / Keep
apart), decided one by one or many at once, and every decision undoable. The work is done by
core/resolution/review.py; this module only draws and calls it. A merge or an undo (graph rows, vectors, the kept
entities' re-embedding) is a merge-decision job of the background worker (core/worker.py), followed by the page's
job panel (ui/job_panel.py); keeping a pair apart or undoing that (one record's status) is done at once."""

from __future__ import annotations

import math

import streamlit as st

from core import access
from core.models import BuildRun, Workspace
from core.pipeline.factory import job_settings
from core.pipeline.runs import JobBusy, result, run_label
from core.quality.data import build_settings
from core.resolution import review as rv
from core.resolution.merge import MergeError
from core.worker import start_job
from ui import guard, job_panel, offered
from ui import resources as R
from ui.text import md_escape, md_label

PAGE = 20
MSG = "mr_msg"
STATUS_LABELS = {"candidate": "Candidates", "merged": "Merged by a reviewer", "auto-merged": "Merged by the build",
                 "rejected": "Rejected", "undone": "Undone", "all": "All"}


@st.cache_data(show_spinner="Reading merge candidates…", max_entries=8)
def _table(ws_id: int, version: str, stamp: tuple) -> list[rv.MergeRow]:
    return rv.merge_table(R.store(), ws_id)


@st.cache_data(show_spinner=False, max_entries=32)
def _sides(ws_id: int, version: str, stamp: tuple, ids: tuple[int, ...]) -> dict[str, rv.Side]:
    want = set(ids)
    return rv.sides(R.store(), ws_id, [r for r in _table(ws_id, version, stamp) if r.id in want])


@st.cache_data(show_spinner=False, max_entries=32)
def _shared(ws_id: int, version: str, stamp: tuple, ids: tuple[int, ...]) -> dict[int, int]:
    want = set(ids)
    return rv.shared_documents(R.store(), ws_id, [r for r in _table(ws_id, version, stamp) if r.id in want])


def _say(kind: str, text: str) -> None:
    st.session_state[MSG] = (kind, text)


# -- decisions (button callbacks: they run before the rerun that draws the result) --------------------------------
def _start(ws: Workspace, action: str, rows: list[rv.MergeRow], failed: str) -> None:
    """Start the merge-decision job (the job panel follows it; `outcome` says how it ended)."""
    assert ws.id is not None  # a row read from or written to the store has its key
    store = R.store()
    label = (f"Merge “{rows[0].titles[1]}” into “{rows[0].titles[0]}”" if action == "accept" and len(rows) == 1
             else f"Accept {len(rows)} merge candidate(s)" if action == "accept"
             else f"Undo the merge of “{rows[0].titles[1]}” into “{rows[0].titles[0]}”")
    st.session_state.pop(MSG, None)  # a new decision: the last one's outcome no longer applies
    try:
        access.require(store, R.me(), ws, "merge")
        if action == "accept":  # the names chosen go with the records the job merges
            if rv.build_running(store, ws.id):
                raise JobBusy("a build or job of this workspace is running; decide once it has finished")
            _pin_names(store, ws.id, rows)
        job_panel.watch(start_job(store, ws, job_settings(build_settings(store, ws.id, R.settings()), ws), "reembed",
                                  {"action": action, "merge_ids": [r.id for r in rows], "label": label}))
    except (JobBusy, ValueError, access.Refused) as exc:
        _say("error", f"{failed}: {md_escape(str(exc))}")


def outcome(store, ws: Workspace, run: BuildRun) -> None:
    """Say how a merge decision this session started ended (shown once, above the table)."""
    assert ws.id is not None and run.id is not None  # a row read from or written to the store has its key
    counts = result(store, run.id).get("decide", {})
    titles = {r.id: r.titles for r in rv.merge_table(store, ws.id) if r.id in set(counts.get("merge_ids") or [])}
    if run.status != "done":
        what = "stopped" if run.status == "cancelled" else f"failed: {md_escape(run.message or run.status)}"
        _say("error" if run.status == "failed" else "info", f"{md_escape(run_label(run))} {what}.")
    elif counts.get("action") == "undo":
        kept, gone = titles.get(counts["merge_ids"][0], ["", ""])
        _say("success", f"“{md_label(gone, 80)}” ~ “{md_label(kept, 80)}”: merge undone: both entities are back.")
    elif len(counts.get("merge_ids") or []) == 1 and counts.get("merged") == 1:
        kept, gone = titles.get(counts["merge_ids"][0], ["", ""])
        comms = rv.communities_of(store, ws.id, counts.get("kept") or [])
        now = {n.id: n.title for n in store.nodes_by_id(ws.id, counts.get("kept") or []).values()}
        named = next(iter(now.values()), kept)
        _say("success", f"Merged “{md_label(gone, 80)}” into “{md_label(kept, 80)}”"
                        + (f", now named “{md_label(named, 80)}”" if named and named != kept else "") + ". "
                        f"{len(comms)} community report(s) marked stale (see the Hierarchy page); the next build "
                        "(Build / resume on the Build page) rewrites them.")
    else:
        skipped = counts.get("skipped") or []
        text = f"Merged {counts.get('merged', 0)} candidate(s)."
        if skipped:
            text += f" Skipped {len(skipped)}: " + "; ".join(
                f"“{md_label(titles.get(mid, ['', ''])[1], 40)}” ({md_escape(why)})" for mid, why in skipped[:5]) + (
                " …" if len(skipped) > 5 else "")
        _say("success" if counts.get("merged") else "warning", text)


def _pin_names(store, ws_id: int, rows: list[rv.MergeRow]) -> None:
    """Record the name chosen for each row whose name picker was drawn (the one the mentions settle on: none);
    a record that refuses raises MergeError."""
    drawn = [r for r in rows if f"mr_name_{r.id}" in st.session_state]
    sides = rv.sides(store, ws_id, drawn) if drawn else {}
    for r in drawn:
        names, settled, _ = rv.name_choices(r, sides)
        chosen = st.session_state[f"mr_name_{r.id}"]
        if chosen in names:
            rv.choose_name(store, ws_id, r.id, None if chosen == settled else chosen)


def _accept(ws: Workspace, row: rv.MergeRow) -> None:
    _start(ws, "accept", [row], "Not merged")


def _reject(ws: Workspace, row: rv.MergeRow) -> None:
    assert ws.id is not None  # a row read from or written to the store has its key
    if not guard.check(ws, "merge"):
        return
    try:
        rv.decline(R.store(), ws.id, row.id)
    except MergeError as exc:
        _say("error", f"Not rejected: {md_escape(str(exc))}")
        return
    _say("info", f"Rejected “{md_label(row.titles[1], 80)}” ~ “{md_label(row.titles[0], 80)}”: "
                 "no build proposes this pair again.")


def _revert(ws: Workspace, row: rv.MergeRow) -> None:
    if not guard.check(ws, "merge"):
        return
    if row.status == "merged":  # graph rows and vectors: a job
        _start(ws, "undo", [row], "Not undone")
        return
    assert ws.id is not None  # a row read from or written to the store has its key
    try:  # a rejection: one record's status, at once
        rv.revert(R.store(), ws.id, row.id, None, None)
    except MergeError as exc:
        _say("error", f"Not undone: {md_escape(str(exc))}")
        return
    _say("success", f"“{md_label(row.titles[1], 80)}” ~ “{md_label(row.titles[0], 80)}”: rejection undone: a "
                    "candidate again.")


def _accept_many(ws: Workspace, rows: list[rv.MergeRow]) -> None:
    _start(ws, "accept", rows, "Not merged")


# -- drawing --------------------------------------------------------------------------------------------------------
WIDTHS = [3, 3, 5, 3, 4]  # kept entity, merged entity, evidence, the name kept, the decision


def _entity(col, side: rv.Side) -> None:
    """One line: the name in bold, then its type and mentions (the description and aliases on hover)."""
    facts = [side.type or "no type", f"{side.mentions:g} mention(s)"] + ([] if side.exists else
                                                                         ["not in the graph now"])
    hover = md_label(side.text, 300) if side.text and side.text != side.title else ""  # a tooltip is Markdown
    if len(side.aliases) > 1:
        hover += ("\n\n" if hover else "") + "Aliases: " + ", ".join(md_label(a, 50) for a in side.aliases[:8])
    col.markdown(f"**{md_label(side.title or side.id, 60)}** :gray[{md_escape(' · '.join(facts))}]",
                 help=hover or None)


def evidence_line(row: rv.MergeRow, shared_docs: int | None) -> str:
    """The pair's evidence in one line of markdown (values 0-1; unmeasured ones say so)."""
    ev = row.evidence_values()
    cos = "—" if ev["embedding"] is None else f"{ev['embedding']:.2f}"
    match = str(row.evidence.get("match", "")).replace("_", " ")
    parts = [f"**score {ev['score']:.2f}**", f"name similarity {ev['name']:.2f}" + (f" ({md_escape(match)})"
                                                                                    if match else ""),
             f"cosine {cos}", f"shared neighbours {ev['neighbours']:.2f}", f"type {ev['type']:.2f}"]
    if shared_docs is not None:
        parts.append(f"{shared_docs} shared document(s)")
    if row.evidence.get("ambiguous"):
        parts.append("ambiguous name")
    return " · ".join(parts)


def _header() -> None:
    cols = st.columns(WIDTHS)
    for col, text in zip(cols, ("Keep (entity kept)", "Merge (into it)", "Evidence", "Name after the merge",
                                "Decision")):
        col.caption(f"**{text}**")


def _row(ws: Workspace, row: rv.MergeRow, sides: dict[str, rv.Side], shared: dict[int, int], busy: bool) -> None:
    with st.container(key=f"mr_row_{row.id}"):
        left, mid, ev_col, name_col, act = st.columns(WIDTHS, vertical_alignment="center")
        kept, gone = sides[row.kept_id], sides[row.merged_id]
        _entity(left, kept)
        _entity(mid, gone)
        ev_col.markdown(f":small[{evidence_line(row, shared.get(row.id) if row.status != 'merged' else None)}]")
        names, _, default = rv.name_choices(row, sides)
        if row.status in ("candidate", "undone") and len(names) > 1:
            offered.one(name_col.radio, "Name after the merge", names, key=f"mr_name_{row.id}",
                        index=names.index(default), label_visibility="collapsed",
                        format_func=lambda n: md_label(n, 40))
        elif row.status == "merged":  # what the kept entity is called now, and the names it carries
            name_col.caption(f"merged, named “{md_label(kept.title or default, 60)}”"
                             + (" · Aliases: " + ", ".join(md_label(a, 40) for a in kept.aliases[:6])
                                if len(kept.aliases) > 1 else ""))
        else:
            name_col.caption(md_label(default, 60))
        if row.status in ("candidate", "undone"):
            gone_now = not (kept.exists and gone.exists)
            a, b = act.columns([2, 3], gap="small")
            a.button("Merge", key=f"mr_accept_{row.id}", type="primary", disabled=busy or gone_now,
                     on_click=_accept, args=(ws, row), help="Merge the right entity into the left one, under the "
                                                             "name chosen")
            b.button("Keep apart", key=f"mr_reject_{row.id}", disabled=busy, on_click=_reject, args=(ws, row),
                     help="Not the same: no build proposes this pair again")
            if gone_now:
                act.caption("An entity of this pair was merged into another since.")
        elif row.status == "merged":
            act.button("Undo merge", key=f"mr_undo_{row.id}", disabled=busy, on_click=_revert, args=(ws, row))
        elif row.status == "rejected":
            act.button("Undo keep apart", key=f"mr_unreject_{row.id}", disabled=busy, on_click=_revert,
                       args=(ws, row))
        else:
            act.caption(md_escape(row.label))


def draw(ws: Workspace) -> None:
    store = R.store()
    ws = store.get_workspace(ws.name) or ws  # the version may have moved since the page started
    assert ws.id is not None  # a row read from or written to the store has its key
    ws_id: int = ws.id
    stamp = rv.review_stamp(store, ws_id)
    rows = _table(ws_id, R.ws_key(ws), stamp)
    msg = st.session_state.get(MSG)  # the last decision's outcome stays until the next decision (a job's end reruns
    if msg:                            # the page more than once: a message shown only once would flash and vanish)
        getattr(st, msg[0])(msg[1])
    if not rows:
        st.info("No merge candidates: the build found no two entities that look like one (or entity resolution "
                "is switched off in the settings).")
        return
    counts = rv.status_counts(rows)
    st.caption("Pairs of entities that may name the same thing, found by name, type, embedding and shared "
               "neighbours (all 0–1; cosine of their embeddings; shared documents mention both). Merge moves the "
               "right entity into the left one under the name chosen (its mentions, relationships and communities "
               "move; the reports of those communities are marked stale); every decision can be undone. Hover a "
               "name for its description and aliases.")
    busy = rv.build_running(store, ws_id)
    if busy:
        st.info("A build or job of this workspace is running: decisions wait until it has finished.")

    c1, c2, c3 = st.columns([5, 3, 2])
    status = offered.one(c1.radio, "Show", list(STATUS_LABELS), horizontal=True, key="mr_status",
                      format_func=lambda k: f"{STATUS_LABELS[k]} ({counts[k] if k in counts else len(rows)})")
    query = c2.text_input("Find by name", key="mr_query", placeholder="part of either name")
    rank = offered.one(c3.selectbox, "Rank by", list(rv.RANKS), key="mr_rank")
    shown = rv.filter_rows(rows, status, query, rank)

    if status == "candidate" and shown:
        with st.expander("Accept many at once"):
            floor = st.slider("Accept every candidate shown with a score of at least", 0.5, 1.0, 0.95, 0.01,
                              key="mr_bulk_score")
            skip_vague = st.checkbox("Leave ambiguous names (a short name matching several others) for review",
                                     value=True, key="mr_bulk_vague")
            pick = [r for r in shown if r.score >= floor and not (skip_vague and r.evidence.get("ambiguous"))]
            st.button(f"Accept {len(pick)} candidate(s)", key="mr_bulk", disabled=busy or not pick,
                      on_click=_accept_many, args=(ws, pick))

    if not shown:
        st.caption("Nothing matches." if query.strip() else f"No {STATUS_LABELS[status].lower()}.")
        return
    pages = math.ceil(len(shown) / PAGE)
    if st.session_state.get("mr_page", 1) > pages:
        st.session_state["mr_page"] = 1  # the filter changed under a later page
    if pages > 1:
        p1, p2 = st.columns([1, 5])
        page = int(p1.number_input("Page", 1, pages, 1, key="mr_page"))
        p2.caption(f"{len(shown):,} shown, {PAGE} per page, ranked by {rank}.")
    else:
        page = 1
        st.caption(f"{len(shown):,} shown, ranked by {rank}.")
    part = shown[(page - 1) * PAGE : page * PAGE]
    sides = _sides(ws_id, R.ws_key(ws), stamp, tuple(r.id for r in part))
    shared = _shared(ws_id, R.ws_key(ws), stamp, tuple(r.id for r in part))
    with st.container(key="mr_table"):
        _header()
        for row in part:
            _row(ws, row, sides, shared, busy)
