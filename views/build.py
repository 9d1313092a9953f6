"""Build: watch the current build live (stages, progress, counts), start, resume or stop one."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from core.backends.base import BackendError
from core.pipeline import active_run, request_cancel
from core.workspace import start_build
from ui import resources as R

store, settings = R.store(), R.settings()
ws = R.current_workspace()
st.title("Build")
if ws is None:
    st.info("No workspace yet: create one on the Workspaces page.")
    st.stop()

PLURAL = {"document": "Documents", "chunk": "Chunks", "entity": "Entities", "relationship": "Relationships",
          "statement": "Statements", "community": "Communities", "edge": "Edges"}

c1, c2, c3 = st.columns([1, 1, 3])
backend = c3.radio("Backend", ["offline", "ollama"], horizontal=True,
                   index=0 if settings.backend.kind == "offline" else 1, label_visibility="collapsed")
running = active_run(store, ws)
if c1.button("Build / resume", type="primary", disabled=running is not None, icon=":material/play_arrow:"):
    try:
        start_build(store, ws, settings, backend)
        st.rerun()
    except BackendError as exc:
        st.error(str(exc))
if c2.button("Stop", disabled=running is None, icon=":material/stop:"):
    request_cancel(store, running.id)
    st.toast("Stopping after the current unit… the next build resumes from there.")


@st.fragment(run_every=1.0 if running is not None else None)
def live() -> None:
    run = store.latest_run(ws.id)
    if run is None:
        st.info("This workspace has not been built yet. Add documents on the Workspaces page, or press Build.")
        return
    stages = store.stage_runs(run.id)
    active = active_run(store, ws)
    stalled = run.status in ("running", "queued", "cancelling") and active is None
    label = {"done": "Build finished", "failed": "Build failed", "cancelled": "Build stopped"}.get(run.status, "")
    if stalled:
        st.warning("The last build stopped without finishing (its worker is gone). Press **Build / resume** "
                   "to continue from the first unfinished unit.")
    elif run.status == "failed":
        st.error(f"Build failed in stage **{run.stage}**: {run.message}")
    elif label:
        (st.success if run.status == "done" else st.info)(f"{label} · run {run.id} · backend {run.backend}")
    finished = sum(1 for s in stages if s.status == "done")
    cur = next((s for s in stages if s.status == "running"), None)
    frac = finished / max(1, len(stages))
    if cur is not None and cur.total:
        frac += (cur.done / cur.total) / max(1, len(stages))
    st.progress(min(1.0, frac), text=(f"Stage {finished + 1}/{len(stages)}: {cur.message}" if cur
                                      else f"{finished}/{len(stages)} stages done"))
    counts = store.counts(ws.id)
    cols = st.columns(7)
    for col, key in zip(cols, ["document", "chunk", "entity", "relationship", "statement", "community", "edge"]):
        col.metric(PLURAL[key], f"{counts.get(key, 0):,}")
    st.dataframe(
        [{"stage": s.stage, "status": s.status,
          "progress": (s.done / s.total) if s.total else (1.0 if s.status == "done" else 0.0),
          "done": f"{s.done:,}/{s.total:,}" if s.total else "", "seconds": round(s.seconds, 1),
          "message": s.message} for s in stages],
        column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0)},
        hide_index=True, width="stretch",
    )
    lay = next((s for s in stages if s.stage == "layers" and s.counts.get("layers")), None)
    if lay is not None:
        rows = lay.counts["layers"]
        a, b = st.columns(2)
        fig = go.Figure(go.Bar(x=[f"layer {r['layer']}" for r in rows], y=[r["entities"] for r in rows],
                               marker_color="#5B8E7D", text=[r["entities"] for r in rows], textposition="outside"))
        fig.update_layout(title="HiRAG: entities per layer", height=280, margin=dict(l=10, r=10, t=40, b=10))
        a.plotly_chart(fig, width="stretch", key="layers")
        b.dataframe([{"layer": r["layer"], "entities": r["entities"], "clusters": r["clusters"],
                      "summary entities": r["summary_entities"], "cluster sparsity": r["cluster_sparsity"],
                      "change rate": r["change_rate"]} for r in rows], hide_index=True, width="stretch")
        if lay.counts.get("stop_reason"):
            b.caption(f"Layering stopped: {lay.counts['stop_reason']}")
    comm = next((s for s in stages if s.stage == "communities" and s.counts), None)
    if comm is not None:
        per_level = comm.counts.get("communities_per_level", {})
        mod = comm.counts.get("modularity", {})
        a, b = st.columns(2)
        levels = sorted(per_level, key=int)
        fig = go.Figure(go.Bar(x=[f"level {lv}" for lv in levels], y=[per_level[lv] for lv in levels],
                               marker_color="#2F6690", text=[per_level[lv] for lv in levels],
                               textposition="outside", textangle=0, cliponaxis=False))
        fig.update_layout(title="Leiden communities per level", height=280, margin=dict(l=10, r=10, t=40, b=10))
        a.plotly_chart(fig, width="stretch", key="per_level")
        fig2 = go.Figure(go.Scatter(x=[f"level {lv}" for lv in sorted(mod, key=int)],
                                    y=[mod[lv] for lv in sorted(mod, key=int)], mode="lines+markers"))
        fig2.update_layout(title="Modularity per level", height=280, margin=dict(l=10, r=10, t=40, b=10),
                           yaxis_range=[0, 1])
        b.plotly_chart(fig2, width="stretch", key="modularity")
        st.caption(f"{comm.counts.get('components', 0)} connected components clustered, "
                   f"{comm.counts.get('tiny_components', 0)} tiny ones (single entities) recorded apart.")
    if run.status == "done":
        done = [s for s in stages if s.status == "done"]
        fig3 = go.Figure(go.Bar(y=[s.stage for s in done], x=[s.seconds for s in done], orientation="h",
                                marker_color="#81C3D7"))
        fig3.update_layout(title="Stage timings (s)", height=260, margin=dict(l=10, r=10, t=40, b=10),
                           yaxis_autorange="reversed")
        st.plotly_chart(fig3, width="stretch", key="timings")
    if running is not None and active is None:
        st.rerun()  # the build ended: redraw the page once without polling


live()
