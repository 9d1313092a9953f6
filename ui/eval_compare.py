"""The Evaluate page's Compare tab: two finished evaluations of the same question set side by side (core/evaluation/
compare.py): per strategy the change of each figure (B minus A) with its paired 95 % bootstrap interval, drawn as a
plot, and per question the wins and losses of the strategy chosen."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from core.evaluation import records
from core.evaluation.compare import compare
from core.models import Workspace
from ui import offered
from ui import resources as R
from ui.eval_results import describe
from ui.retrieval_view import strategy_label as label


def _cell(c: dict | None) -> str:
    if c is None or c["n"] == 0:
        return "—"
    sign = "+" if c["delta"] >= 0 else ""
    return f"{c['a']:.3f} → {c['b']:.3f}  ({sign}{c['delta']:.3f} [{c['low']:+.3f}, {c['high']:+.3f}])"


def draw(ws: Workspace) -> None:
    store = R.store()
    done = [e for e in records.list_evaluations(store, ws.id or 0) if e.status == "done"]
    groups: dict[str, list] = {}
    for e in done:
        groups.setdefault(e.question_hash, []).append(e)
    pairs = {h: evs for h, evs in groups.items() if len(evs) > 1}
    if not pairs:
        st.info("Two finished evaluations of the same question set compare here: re-run an evaluation (Results, "
                "after a rebuild, a merge decision or a promote) or run the same questions again.")
        return
    by_id = {e.id: e for evs in pairs.values() for e in evs}
    ids = list(by_id)  # newest first
    c = st.columns(2)
    b_id = offered.one(c[1].selectbox, "B (after)", ids, key="ev_cmp_b", format_func=lambda i: describe(by_id[i]))
    same = [i for i in ids if i != b_id and by_id[i].question_hash == by_id[b_id].question_hash]
    a_id = offered.one(c[0].selectbox, "A (before)", same, key="ev_cmp_a", format_func=lambda i: describe(by_id[i]))
    if a_id is None or b_id is None:
        return
    a, b = by_id[a_id], by_id[b_id]
    st.caption(f"A: build {a.build_version}, partition {a.partition or 'built'}, backend {a.backend} · "
               f"B: build {b.build_version}, partition {b.partition or 'built'}, backend {b.backend}")
    out = compare(a, records.results(store, a), b, records.results(store, b))
    keys = [f"recall@{k}" for k in a.ks if k in b.ks] + ["mrr", "answer_in_context"]
    st.container(key="ev_cmp_box").dataframe([{"strategy": label(n), **{k: _cell(row.get(k)) for k in keys},
                   "wins": out["wins"][n], "losses": out["losses"][n]} for n, row in out["strategies"].items()],
                                             hide_index=True, width="stretch", key="ev_cmp_table",
                                             height=35 * (len(out["strategies"]) + 1) + 3)
    st.caption("Each cell: A → B (the change B − A, with its paired 95 % bootstrap interval: the same resampled "
               "questions for both runs). An interval that holds 0 is no clear change. A win: B found more of the "
               "question's gold in its top k, or ranked its first gold document higher.")
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
