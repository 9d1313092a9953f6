"""Build: a finished build opens on its verdict in plain words (core/explore/verdict.py: "build N", what the graph
holds, what is unusual), with the stage figures in expanders below (open while a build runs: watch it live); start,
resume or stop one; the failed units (model calls that still failed after their retries) with a button that retries
them."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from core import access
from core.backends.host_speed import host_speeds
from core.config import BACKEND_KINDS
from core.explore.build_counts import GraphCounts
from core.explore.hierarchy import METHODS, frame_signature, has_rows, hierarchy_frame
from core.explore.verdict import Verdict, build_verdict, duration
from core.models import Workspace
from core.pipeline import runs
from core.pipeline.failures import failed_units, plural
from core.pipeline.runs import active_run, request_cancel
from core.protocols import BackendError
from core.workspace import retry_failed, start_build
from ui import eval_results, guard, offered
from ui import failed_units as FU
from ui import resources as R
from ui.hierarchy_chart import hierarchy_chart
from ui.text import md_escape

store, settings = R.store(), R.settings()
current = R.current_workspace()
st.title("Build")
if current is None:
    st.info("No workspace yet: create one on the Workspaces page.")
    st.stop()
ws: Workspace = current
assert ws.id is not None  # a row read from or written to the store has its key
ws_id: int = ws.id

c1, c2, c3 = st.columns([1, 1, 3])
backend = offered.one(c3.radio, "Backend", list(BACKEND_KINDS), horizontal=True, key="build_backend",
                   index=BACKEND_KINDS.index(settings.backend.kind), label_visibility="collapsed")
running = active_run(store, ws)
can_build = guard.allowed(ws, "build")
if not can_build:
    st.caption(guard.why_not(ws, "build"))
if c1.button("Build / resume", type="primary", disabled=running is not None or not can_build,
             icon=":material/play_arrow:"):
    try:
        start_build(store, R.me(), ws, settings, backend)
        st.rerun()
    except (BackendError, access.Refused) as exc:
        st.error(md_escape(str(exc)))
if running is not None and (running.kind or "build") != "build":  # a job (core/worker.py) holds the workspace
    st.info(f"{runs.run_label(running)} is running (see the Quality page): a build can start once it has finished.",
            icon=":material/hourglass_top:")
if c2.button("Stop", disabled=running is None or not can_build, icon=":material/stop:") and guard.check(ws, "stop"):
    assert running is not None and running.id is not None  # the button is enabled only while a run is active
    request_cancel(store, running.id)
    st.toast("Stopping after the current unit… the next build resumes from there.")


def _failed_units() -> None:
    """The workspace's failed units (of builds and jobs alike) and the button that retries them: a build with the
    backend and model that failed them (any build retries them; a unit that succeeds leaves the list)."""
    units = failed_units(store, ws_id)
    if not units:
        return
    with st.container(border=True, key="failed_units"):
        a, b = st.columns([4, 1])
        a.warning(f"**{plural(len(units))}**: their model calls still failed after their retries, so nothing was "
                  "stored for them. The next build retries them (Build / resume), or retry them now.",
                  icon=":material/error:")
        if b.button("Retry failed units", disabled=running is not None or not can_build, icon=":material/replay:"):
            try:
                retry_failed(store, R.me(), ws, settings)
                st.rerun()
            except (BackendError, access.Refused) as exc:
                st.error(md_escape(str(exc)))
        FU.table(units, "failed_units_table", ws_id)


MARGIN = dict(l=10, r=10, t=40, b=10)


def _layers(counts: dict) -> None:
    """HiRAG layers as they appear (hirag.txt §5.4, Fig. 4): entities per layer, cluster sparsity CS_i and its change
    rate against ε (the rule that stops the layering), and the stop reason."""
    rows = counts.get("layers") or []
    if not rows:
        return
    a, b = st.columns(2)
    names = [f"layer {r['layer']}" for r in rows]
    fig = go.Figure(go.Bar(x=names, y=[r.get("entities", 0) for r in rows], name="entities", marker_color="#5B8E7D",
                           text=[r.get("entities", 0) for r in rows], textposition="outside", cliponaxis=False))
    cs = [r.get("cluster_sparsity") for r in rows]
    rate = [r.get("change_rate") for r in rows]
    if any(v is not None for v in cs):
        fig.add_trace(go.Scatter(x=names, y=cs, name="cluster sparsity CS", mode="lines+markers", yaxis="y2",
                                 marker_color="#BC4B51"))
    if any(v is not None for v in rate):
        fig.add_trace(go.Scatter(x=names, y=[None if v is None else min(v, 1.0) for v in rate], yaxis="y2",
                                 name="CS change rate", mode="lines+markers", marker_color="#F4A259",
                                 line=dict(dash="dot"), hovertext=[None if v is None else f"{v:.1%}" for v in rate]))
    eps = counts.get("epsilon")
    if eps is not None and any(v is not None for v in rate):
        fig.add_trace(go.Scatter(x=[names[0], names[-1]], y=[eps, eps], yaxis="y2", name=f"ε = {eps:.0%}",
                                 mode="lines", line=dict(color="#8E8E8E", dash="dash", width=1)))
    fig.update_layout(title="HiRAG: entities per layer, CS and its change rate", height=300, margin=MARGIN,
                      legend=dict(orientation="h", y=-0.2),
                      yaxis2=dict(overlaying="y", side="right", range=[0, 1.05], dtick=0.25, showgrid=False,
                                  title="CS / change rate", color="#BC4B51"))
    a.plotly_chart(fig, width="stretch", key="layers")
    b.dataframe([{"layer": r.get("layer"), "entities": r.get("entities"), "global clusters": r.get("global_clusters"),
                  "clusters": r.get("clusters"), "summary entities": r.get("summary_entities"),
                  "cluster sparsity": r.get("cluster_sparsity"), "change rate": r.get("change_rate"),
                  "stop reason": r.get("stop_reason")} for r in rows], hide_index=True, width="stretch")
    if counts.get("stop_reason"):
        b.caption(f"Layering stopped: {counts['stop_reason']}")


def _per_level_bar(per_level: dict, title: str, color: str, key: str, where) -> None:
    levels = sorted(per_level, key=int)
    fig = go.Figure(go.Bar(x=[f"level {lv}" for lv in levels], y=[per_level[lv] for lv in levels],
                           marker_color=color, text=[per_level[lv] for lv in levels],
                           textposition="outside", textangle=0, cliponaxis=False))
    fig.update_layout(title=title, height=280, margin=MARGIN)
    where.plotly_chart(fig, width="stretch", key=key)


def _leiden(counts: dict, name: str = "Leiden", key: str = "") -> bool:
    """Communities and modularity per level of one hierarchical Leiden run (the stage's counts of it)."""
    if not counts.get("communities_per_level"):
        return False
    mod = counts.get("modularity", {})
    a, b = st.columns(2)
    _per_level_bar(counts["communities_per_level"], f"{name} communities per level", "#2F6690", f"{key}per_level", a)
    fig2 = go.Figure(go.Scatter(x=[f"level {lv}" for lv in sorted(mod, key=int)],
                                y=[mod[lv] for lv in sorted(mod, key=int)], mode="lines+markers"))
    fig2.update_layout(title=f"{name}: modularity per level", height=280, margin=MARGIN, yaxis_range=[0, 1])
    b.plotly_chart(fig2, width="stretch", key=f"{key}modularity")
    return True


def _communities(counts: dict, gc: GraphCounts) -> None:
    """GraphRAG's Leiden on the extracted entities, then HiRAG's Leiden on its layered graph (entity counts: the
    verdict's, core/explore/build_counts.py)."""
    if _leiden(counts, "Leiden (GraphRAG)"):
        st.caption(f"Extracted entity graph: {gc.entities:,} entities after resolution; "
                   f"{counts.get('components', 0)} connected components clustered, "
                   f"{counts.get('tiny_components', 0)} single entities linked to no other recorded apart.")
    hi = counts.get("hirag") or {}
    if _leiden(hi, "HiRAG", "hirag_"):
        st.caption(f"HiRAG's layered graph: {gc.all_entities:,} entities of every layer ({gc.entities:,} after "
                   f"resolution + {gc.summary_entities:,} summary entities), {hi.get('links', 0):,} links; "
                   f"{hi.get('with_summary_entities', 0):,} communities hold a summary entity.")


def _noderag(counts: dict) -> None:
    """NodeRAG's own communities: one flat level, as the augment stage counted them when it wrote them."""
    if counts.get("communities"):
        a, _ = st.columns(2)
        _per_level_bar({"0": counts["communities"]}, "NodeRAG communities per level", "#F4A259", "noderag_per_level",
                       a)


def _attributed(counts: dict) -> None:
    """ArchRAG: attributed communities per level, the KNN augmentation and the C-HNSW index."""
    if not counts.get("communities_per_level"):
        return
    a, b = st.columns(2)
    _per_level_bar(counts["communities_per_level"], "Attributed communities per level (ArchRAG)", "#9D4EDD",
                   "attributed_per_level", a)
    with b:
        m1, m2, m3 = st.columns(3)
        m1.metric("Attributed levels", f"{counts.get('levels', len(counts['communities_per_level'])):,}")
        m2.metric("KNN edges", f"{counts.get('knn_edges', 0):,}")
        m3.metric("C-HNSW nodes", f"{counts.get('chnsw_nodes', 0):,}")
        if counts.get("layer_sizes"):
            st.caption("Nodes per ArchRAG layer as it was built (layer 0: the entities): "
                       + " · ".join(f"{n:,}" for n in counts["layer_sizes"]))


@st.cache_data(show_spinner=False, max_entries=8)
def _frame_so_far(ws_id: int, method: str, signature: tuple):
    return hierarchy_frame(store, ws_id, method, max_sectors=400)


def _hierarchy_so_far(expanded: bool) -> None:
    """A sunburst of the communities stored right now: it grows as the stages write level after level."""
    sigs = {m: frame_signature(store, ws_id, m) for m in ("leiden", "hirag", "noderag", "attributed")}
    present = [m for m, sig in sigs.items() if has_rows(sig)]
    if not present:
        return
    with (st.expander("Hierarchy so far" if expanded else "Hierarchy", expanded=expanded, icon=":material/donut_large:"),
          st.container(border=True, key="hierarchy_so_far")):
        method = present[0]
        if len(present) > 1:
            method = offered.one(st.radio, "Hierarchy so far", present, format_func=METHODS.get, horizontal=True,
                              key="build_hier_method", label_visibility="collapsed")
        fr = _frame_so_far(ws_id, method, sigs[method])
        levels = ", ".join(f"{n:,} at level {lv}" for lv, n in sorted(fr.per_level.items()))
        st.caption(f"Hierarchy so far: {METHODS[method]}, {levels}. Open the Hierarchy page to explore them.")
        st.altair_chart(hierarchy_chart(fr, "sunburst", height=420, select=False), width="stretch",
                        key="hierarchy_sunburst")


_HELP = {"HLG topics": "With a model backend, as the HLG paper does (§6.2): the model groups each chunk's statements "
                       "into topics it titles and summarizes. Offline (or with lexical.topics = \"clustering\") "
                       "agglomerative clustering of each document's statement vectors (similarity cut 0.35, at most "
                       "12 per topic) stands in, each group titled and summarized by the backend."}


def _graph_extras(by_stage: dict, gc: GraphCounts) -> None:
    """Entity resolution, NodeRAG augmentation and HLG topics: their counts once the stages report them (the topics
    stored: the verdict's count)."""
    merge, augment, lexical = by_stage.get("merge", {}), by_stage.get("augment", {}), by_stage.get("lexical", {})
    metrics = []
    if merge:
        metrics += [("Merge candidates", merge.get("candidates", 0)), ("Auto-merged", merge.get("auto_merged", 0))]
    if lexical:
        metrics += [("HLG topics", gc.topics), ("Facts linked", lexical.get("facts_linked", 0)),
                    ("Cross-document facts", lexical.get("cross_document_facts", 0))]
    if augment:
        metrics += [("Important entities", augment.get("important_entities", 0)),
                    ("Semantic edges", augment.get("semantic_edges", 0)),
                    ("High-level matches", augment.get("matches", 0))]
    if not metrics and not augment.get("nodes"):
        return
    a, b = st.columns(2)
    with a:
        for i in range(0, len(metrics), 3):
            for col, (label, value) in zip(st.columns(3), metrics[i : i + 3]):
                col.metric(label, f"{value:,}" if isinstance(value, int) else str(value), help=_HELP.get(label))
    nodes = augment.get("nodes") or {}
    if nodes:
        fig = go.Figure(go.Bar(x=list(nodes), y=list(nodes.values()), marker_color="#F4A259",
                               text=list(nodes.values()), textposition="outside", cliponaxis=False))
        fig.update_layout(title="NodeRAG: nodes added by kind", height=260, margin=MARGIN)
        b.plotly_chart(fig, width="stretch", key="noderag_nodes")


def _verdict(v: Verdict) -> None:
    """The verdict first (core/explore/verdict.py): the headline, what the graph holds, what is unusual."""
    before, bold, after = v.headline.partition(v.stress)
    text = f"{md_escape(before)}**{md_escape(bold)}**{md_escape(after)}" if bold else md_escape(v.headline)
    {"success": st.success, "warning": st.warning, "error": st.error}.get(v.tone, st.info)(text)
    if v.number is None and not v.facts:
        return
    with st.container(border=True, key="build_verdict"):
        a, b = st.columns([3, 2])
        a.markdown("\n".join(f"- {md_escape(f)}" for f in v.facts))
        if v.notes:
            b.markdown("**Worth a look**\n\n" + "\n".join(f"- {md_escape(n)}" for n in v.notes))
        elif v.number is not None:  # a finished build
            b.markdown("**Nothing unusual**: no failed unit, no collapsed HiRAG layer, no community over its cap, "
                       "few single-member communities.")


def _stages(v: Verdict, run) -> None:
    """Progress, the graph's counts (the verdict's), each stage's figures and, once done, their timings."""
    stages = v.rows
    finished = sum(1 for s in stages if s.status == "done")
    cur = next((s for s in stages if s.status == "running"), None)
    frac = finished / max(1, len(stages))
    if cur is not None and cur.total:
        frac += (cur.done / cur.total) / max(1, len(stages))
    st.progress(min(1.0, frac), text=(f"Stage {finished + 1}/{len(stages)}: {md_escape(cur.message or '')}" if cur
                                      else f"{finished}/{len(stages)} stages done"))
    gc = v.counts
    figures = [("Documents", gc.documents), ("Chunks", gc.chunks), ("Entities after resolution", gc.entities),
               ("Summary entities", gc.summary_entities), ("Relationships", gc.relationships),
               ("Statements", gc.statements), ("Communities", gc.communities), ("Edges", gc.edges)]
    for i in range(0, len(figures), 4):  # two rows of four: each label whole
        for col, (label, value) in zip(st.columns(4), figures[i : i + 4]):
            col.metric(label, f"{value:,}", help=COUNT_HELP.get(label))
    st.dataframe(
        [{"stage": s.stage, "status": s.status,
          "progress": (s.done / s.total) if s.total else (1.0 if s.status == "done" else 0.0),
          "done": f"{s.done:,}/{s.total:,}" if s.total else "", "seconds": round(s.seconds, 1),
          "message": s.message} for s in stages],
        column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0)},
        hide_index=True, width="stretch",
    )
    if run.status == "done":
        done = [s for s in stages if s.status == "done"]
        fig3 = go.Figure(go.Bar(y=[s.stage for s in done], x=[s.seconds for s in done], orientation="h",
                                marker_color="#81C3D7"))
        fig3.update_layout(title="Stage timings (s)", height=260, margin=MARGIN,
                           yaxis_autorange="reversed")
        st.plotly_chart(fig3, width="stretch", key="timings")


@st.cache_data(show_spinner=False, ttl=5, max_entries=8)
def _speeds(run_id: int, since, until) -> list:
    return host_speeds(store, since, until)


def _hosts(run) -> None:
    """Each model host's real speed in this build (core/backends/host_speed.py): the calls it answered, the tokens it
    read and wrote, tokens per second. A build whose replies all came from the call cache asked no host."""
    if run.backend == "offline":
        return
    speeds = _speeds(run.id, run.created_at, run.finished_at)
    with st.expander("Model hosts", expanded=not speeds or run.status != "done", icon=":material/speed:"):
        if not speeds:
            st.caption("No model call in this build so far: every reply came from the call cache.")
            return
        st.dataframe([{"host": h.host, "calls": h.calls, "tokens read": h.tokens_in, "tokens written": h.tokens_out,
                       "request seconds": round(h.seconds, 1),
                       "read tokens/s": None if h.read_per_s is None else round(h.read_per_s, 1),
                       "written tokens/s": None if h.write_per_s is None else round(h.write_per_s, 1),
                       "measured by": h.how} for h in speeds], hide_index=True, width="stretch", key="host_speeds")
        st.caption("Tokens per second of one request (requests sent in parallel overlap); replies from the call "
                   "cache are not counted.")


COUNT_HELP = {"Entities after resolution": "Extracted entities once same-named and auto-merged ones are one (HiRAG "
                                           "layer 0).",
              "Summary entities": "HiRAG's summary entities, made by its layers 1 and up.",
              "Communities": "Of HiRAG, hierarchical Leiden, ArchRAG and NodeRAG (not the connected components)."}


@st.fragment(run_every=1.0 if running is not None else None)
def live() -> None:
    run = store.latest_run(ws_id, ("build",))  # a job's steps are shown on the Quality page
    if run is None:
        st.info("This workspace has not been built yet. Add documents on the Workspaces page, or press Build.")
        return
    v = build_verdict(store, ws, run)  # judged on this one read of the row (a second read could race its end)
    _verdict(v)
    done, by_stage = run.status == "done", v.stages
    secs = sum(s.seconds for s in v.rows)
    with st.expander(f"Stages: {sum(1 for s in v.rows if s.status == 'done')}/{len(v.rows)} done · "
                     f"{duration(secs)} of stage time", expanded=not done, icon=":material/view_timeline:"):
        _stages(v, run)
    _hosts(run)
    if (by_stage.get("layers") or {}).get("layers"):
        with st.expander("HiRAG layers", expanded=not done, icon=":material/layers:"):
            _layers(by_stage["layers"])
    if any((by_stage.get(k) or {}).get(f) for k, f in (("communities", "communities_per_level"),
                                                        ("attributed", "communities_per_level"),
                                                        ("augment", "communities"))):
        with st.expander("Communities per level", expanded=not done, icon=":material/hub:"):
            _communities(by_stage.get("communities", {}), v.counts)
            _attributed(by_stage.get("attributed", {}))
            _noderag(by_stage.get("augment", {}))
    if any(by_stage.get(k) for k in ("merge", "lexical", "augment")):
        with st.expander("Entity resolution, HLG topics and NodeRAG", expanded=not done, icon=":material/merge:"):
            _graph_extras(by_stage, v.counts)
    _hierarchy_so_far(expanded=not done)
    # when the build ends, the sidebar's status (ui/sidebar.py) draws the whole page again, once


live()
_failed_units()
if running is None:
    eval_results.offer_rerun(ws)  # after a rebuild: the last evaluation, to re-run
