"""The Evaluate page's Compare tab: two finished evaluations of one question set side by side (core/evaluation/
compare.py), from two builds of this workspace or from this workspace and another the user may read that was
evaluated on the same questions (core/evaluation/across.py; questions paired by text): per strategy the change of
each figure (B minus A) with its paired 95 % bootstrap interval, drawn as a plot, and per question the wins and
losses of the strategy chosen."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from core.evaluation import records
from core.evaluation.across import comparable
from core.evaluation.compare import Change, compare, significant_changes
from core.evaluation.leads import shown_metric
from core.models import Workspace
from ui import offered
from ui import resources as R
from ui.retrieval_view import strategy_label as label
from ui.text import md_escape


def _cell(c: dict | None) -> str:
    if c is None or c["n"] == 0:
        return "—"
    sign = "+" if c["delta"] >= 0 else ""
    clear = " ●" if Change(**c).significant else ""
    return f"{c['a']:.3f} → {c['b']:.3f}  ({sign}{c['delta']:.3f} [{c['low']:+.3f}, {c['high']:+.3f}]){clear}"


def draw(ws: Workspace) -> None:
    store = R.store()
    here = ws.id or 0
    found = comparable(store, R.me(), ws)
    if not found.evaluations:
        st.info("Two finished evaluations of the same questions compare here: re-run an evaluation (Results, after "
                "a rebuild, a merge decision or a promote), run the same questions again, or run them on another "
                "workspace you may read.")
        return
    evs = found.evaluations
    ids = list(evs)  # this workspace's first, newest first
    c = st.columns(2)
    b_id = offered.one(c[1].selectbox, "B (after)", ids, key="ev_cmp_b",
                       format_func=lambda i: found.label(evs[i], here))
    a_id = offered.one(c[0].selectbox, "A (before)", found.partners[b_id], key="ev_cmp_a",
                       format_func=lambda i: found.label(evs[i], here))
    if a_id is None or b_id is None:
        return
    a, b = evs[a_id], evs[b_id]
    out = compare(a, records.results(store, a), b, records.results(store, b))
    where = {e.id: md_escape(found.workspaces.get(e.workspace_id, "?")) for e in (a, b)}
    st.caption(f"A: {where[a.id]}, build {a.build_version}, partition {md_escape(a.partition or 'built')}, backend "
               f"{md_escape(a.backend)} · B: {where[b.id]}, build {b.build_version}, partition "
               f"{md_escape(b.partition or 'built')}, backend {md_escape(b.backend)} · {out['paired']} questions "
               f"paired by text (A has {len(a.questions)}, B {len(b.questions)})")
    if not out["strategies"]:
        st.caption("The two evaluations measured no strategy in common.")
        return
    moved = significant_changes(out)
    st.container(key="ev_cmp_verdict").markdown(
        ("**Significant changes** (B − A): " + " · ".join(
            f"{md_escape(label(n))} {shown_metric(k)} {c['delta']:+.3f} \\[{c['low']:+.3f}, {c['high']:+.3f}\\]"
            for n, k, c in moved)) if moved else
        f"**No figure changed significantly** between A and B on these {out['paired']} questions: every paired "
        "interval holds 0.")
    keys = [f"recall@{k}" for k in a.ks if k in b.ks] + ["mrr", "answer_in_context"]
    st.container(key="ev_cmp_box").dataframe([{"strategy": label(n), **{k: _cell(row.get(k)) for k in keys},
                   "wins": out["wins"][n], "losses": out["losses"][n]} for n, row in out["strategies"].items()],
                                             hide_index=True, width="stretch", key="ev_cmp_table",
                                             height=35 * (len(out["strategies"]) + 1) + 3)
    st.caption("Each cell: A → B (the change B − A, with its paired 95 % bootstrap interval: the same resampled "
               "questions for both runs). ● marks a significant change; an interval that holds 0 is no clear "
               "change. A win: B found more of the question's gold in its top k, or ranked its first gold "
               "document higher.")
    key = keys[min(1, len(keys) - 1)]
    names = list(out["strategies"])
    deltas = [out["strategies"][n][key] for n in names]
    fig = go.Figure(go.Bar(x=[label(n) for n in names], y=[d["delta"] for d in deltas], error_y={
        "type": "data", "symmetric": False, "array": [d["high"] - d["delta"] for d in deltas],
        "arrayminus": [d["delta"] - d["low"] for d in deltas]}))
    fig.update_layout(height=300, margin=dict(l=8, r=8, t=36, b=8), title=f"Change of {key}, B − A (95 % interval)")
    st.plotly_chart(fig, key="ev_cmp_plot", width="stretch")
    who = offered.one(st.selectbox, "Wins and losses of", names, format_func=label, key="ev_cmp_strategy")
    rows = [p for p in out["questions"][who] if p["outcome"] != "tie"]
    if not rows:
        st.caption("Every question ties.")
        return
    top = next(iter(rows[0]["a"]))
    gen = {i for i, q in enumerate(a.questions) if q.get("generated")}
    st.dataframe([{"outcome": p["outcome"], "id": p["id"],
                   "question": p["text"] + ("  (generated)" if p["question"] in gen else ""),
                   f"A {top}": p["a"][top], f"B {top}": p["b"][top], "A rr": round(p["a"]["rr"], 3),
                   "B rr": round(p["b"]["rr"], 3)} for p in rows], hide_index=True, width="stretch",
                 key="ev_cmp_questions")
