"""The Quality page's What-if tab: re-run community detection with other settings into a named variant, compare
variants with the current partition (metrics per level, NMI and ARI), and promote one to be the partition retrieval
uses (reversible: the partition it replaces is kept as a variant). A variant run and a promote are jobs of the
background worker (core/worker.py): the page's job panel (ui/job_panel.py) shows their progress and stops them,
and `outcome` says how the one this session started ended."""

from __future__ import annotations

import html
import math

import streamlit as st

from core import access
from core.evaluation.partitions import measured_name, recall_effect
from core.models import BuildRun
from core.pipeline.failures import count_failed, plural
from core.pipeline.runs import JobBusy, result, run_label
from core.quality.compare import compare
from core.quality.variants import (
    CURRENT,
    VariantError,
    VariantSettings,
    defaults,
    delete_variant,
    list_variants,
)
from core.worker import start_promote, start_variant
from ui import job_panel, offered, quality_tab
from ui import resources as R
from ui.text import md_escape

COLUMNS = [  # (row key, column title, format)
    ("communities", "communities", "{:,.0f}"), ("nmi", "NMI vs current", "{:.3f}"),
    ("ari", "ARI vs current", "{:.3f}"), ("modularity", "modularity", "{:.3f}"),
    ("own_modularity", "modularity (own graph)", "{:.3f}"), ("coverage", "coverage", "{:.1%}"),
    ("conductance_mean", "mean conductance", "{:.3f}"), ("coherence_mean", "mean coherence", "{:.3f}"),
    ("calinski_harabasz", "Calinski–Harabasz", "{:,.1f}"), ("cluster_sparsity", "cluster sparsity", "{:.4f}"),
    ("singleton_share", "singletons", "{:.1%}"), ("tiny_share", "tiny", "{:.1%}"),
]
MSG = "wi_message"


@st.cache_data(show_spinner="Comparing partitions…", max_entries=16)
def comparison(ws_id: int, version: str, ws_name: str, embedder: str, names: tuple[str, ...],
               signature: tuple) -> list[dict]:
    ws = R.store().require_workspace(ws_name)
    levels = quality_tab.method_levels(ws_id, version, ws_name, embedder, "leiden")
    current = {str(ld.level): quality_tab.metrics(ws_id, version, ws_name, embedder, "leiden",
                                                  ld.level).figures for ld in levels}
    return compare(R.store(), R.vector_index(ws_name, embedder), ws, list(names), R.settings(),
                   base=quality_tab.entity_base(ws_id, version, ws_name, embedder), current_figures=current)


def outcome(store, ws, run: BuildRun) -> None:
    """Say how a what-if run or promote this session started ended (shown once, above the variants)."""
    assert run.id is not None  # a row read from the store has its key
    steps = result(store, run.id)
    label = run_label(run)
    if run.status == "done" and run.kind == "whatif":
        counts = steps.get("variant", {})
        name = counts.get("variant", "")
        per_level = ", ".join(f"level {k}: {v:,}" for k, v in counts.get("communities_per_level", {}).items())
        st.session_state[MSG] = ("success", f"Variant **{md_escape(name)}** made in {counts.get('seconds', 0):.1f} s "
                                            f"({per_level}).")
        chosen = [n for n in st.session_state.get("wi_compare", []) if n != name]
        st.session_state["wi_compare"] = [name] + chosen[:5]
    elif run.status == "done":
        counts = steps.get("replace", {})
        n_failed = count_failed(store, ws.id, run.id)  # reports whose model calls failed: listed by the job panel
        st.session_state[MSG] = ("warning" if n_failed else "success",
                                 f"Promoted **{md_escape(counts.get('variant', ''))}**: "
                                 f"{counts.get('communities', 0):,} communities; the previous partition is "
                                 f"saved as **{md_escape(counts.get('snapshot') or '—')}**."
                                 + (f" Finished with {plural(n_failed)} (listed above)." if n_failed else ""))
    elif run.status == "cancelled":
        replaced = run.kind == "promote" and "snapshot" in steps.get("replace", {})
        st.session_state[MSG] = ("info", f"{md_escape(label)} stopped." + (
            " The partition was already replaced: its missing reports and community vectors are made by the next "
            "build (Build / resume) or by promoting again." if replaced else ""))
    else:
        st.session_state[MSG] = ("error", f"{md_escape(label)} failed: {md_escape(run.message or run.status)}")


def _form(ws) -> None:
    store, settings = R.store(), R.settings()
    d = defaults(store, ws.id, settings)
    with st.form("wi_form"):
        st.markdown("**New variant** · the fields start at the last build's settings, which reproduce the current "
                    "partition")
        name = st.text_input("Variant name", placeholder="e.g. resolution-2", key="wi_name")
        c = st.columns(4)
        resolution = c[0].number_input("Resolution", value=float(d.resolution), step=0.1, format="%.2f",
                                       key="wi_resolution", help="Higher gives more, smaller communities.")
        max_size = c[1].number_input("Max cluster size", value=int(d.max_cluster_size), step=1, key="wi_max_size",
                                     help="Communities larger than this are split again one level down.")
        max_levels = c[2].number_input("Levels", value=int(d.max_levels), step=1, key="wi_levels")
        seed = c[3].number_input("Seed", value=int(d.seed), step=1, key="wi_seed")
        c = st.columns(4)
        weights = c[0].checkbox("Relationship weights", value=d.use_weights, key="wi_weights")
        knn = c[1].checkbox("KNN augmentation (ArchRAG)", value=False, key="wi_knn",
                            help="Also link every entity to its most similar entities; every link is then weighted "
                                 "by attribute similarity.")
        knn_k = c[2].number_input("KNN neighbours", value=int(d.knn_k), step=1, key="wi_knn_k")
        min_sim = c[3].number_input("KNN min similarity", value=float(d.min_similarity), step=0.05, format="%.2f",
                                    key="wi_min_sim")
        submitted = st.form_submit_button("Run variant", icon=":material/play_arrow:", type="primary")
    if not submitted:
        return
    try:
        vs = VariantSettings.from_dict(dict(resolution=resolution, max_cluster_size=max_size, max_levels=max_levels,
                                            seed=seed, use_weights=weights, knn=knn, knn_k=knn_k,
                                            min_similarity=min_sim, min_component_size=d.min_component_size))
        st.session_state.pop(MSG, None)
        job_panel.watch(start_variant(store, R.me(), ws, name, vs, settings))
    except (VariantError, JobBusy, access.Refused) as exc:
        st.error(md_escape(str(exc)), icon=":material/error:")
        return
    st.rerun()  # the job panel follows the run


def _cell(v, fmt: str) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def _compare(ws, variants) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = [v.name for v in variants]
    if "wi_compare" not in st.session_state:
        st.session_state["wi_compare"] = names[:4]
    st.session_state["wi_compare"] = [n for n in st.session_state["wi_compare"] if n in names]
    chosen = offered.many(st.multiselect, "Compare with the current partition", names, key="wi_compare")
    sig = tuple((v.id, v.name) for v in variants if v.name in chosen)
    rows = comparison(ws.id, R.ws_key(ws), ws.name, ws.embedder, tuple(chosen), sig)
    if not rows:
        st.info("No Leiden partition to compare.")
        return
    head = ["partition", "level"] + [title for _, title, _ in COLUMNS]
    body = [[r["partition"], str(r["level"])] + [_cell(r.get(k), fmt) for k, _, fmt in COLUMNS] for r in rows]
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    with st.container(key="wi_table"):  # a plain HTML table (every cell escaped): readable, copyable, small
        st.markdown("<div style='overflow-x:auto'><table style='font-size:0.85rem'><thead><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in head) + f"</tr></thead><tbody>{cells}"
                    "</tbody></table></div>", unsafe_allow_html=True)
    st.caption("Every figure is measured on the graph the build clustered, so partitions compare on one footing; "
               "'own graph' is a variant's modularity on the graph it clustered (KNN links, weights off). NMI and "
               "ARI compare each level's view with the current one's: every entity in its community at that level "
               "or its deepest one above, so past a partition's last level they compare its finest partition.")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Modularity per level", "NMI vs current per level"))
    for name in [CURRENT] + chosen:
        mine = [r for r in rows if r["partition"] == name]
        lv = [r["level"] for r in mine]
        fig.add_trace(go.Scatter(x=lv, y=[r["modularity"] for r in mine], mode="lines+markers", name=name,
                                 legendgroup=name), row=1, col=1)
        if name != CURRENT:
            fig.add_trace(go.Bar(x=lv, y=[r["nmi"] for r in mine], name=name, legendgroup=name, showlegend=False),
                          row=1, col=2)
    fig.update_layout(height=330, margin=dict(l=8, r=8, t=40, b=8), barmode="group")
    fig.update_xaxes(title_text="level", dtick=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    st.plotly_chart(fig, key="wi_chart", width="stretch")


def _recall(ws, variants) -> None:
    """Beside NMI and ARI: each partition's recall on the workspace's newest evaluation set, when one was measured
    while that partition was promoted (core/evaluation/partitions.py), with its change against the current one."""
    effect = recall_effect(R.store(), ws)
    st.markdown("**Recall effect** · what retrieval finds with each partition")
    if effect is None:
        st.caption("No evaluation of this workspace yet: run one on the Evaluate page to see each partition's "
                   "effect on retrieval here.")
        return
    measured = effect["partitions"]
    rows = []
    for name, as_measured in [(CURRENT, effect["current"])] + [(v.name, measured_name(v.name, v.settings))
                                                                for v in variants]:
        got = measured.get(as_measured)
        if got is None:
            rows.append({"partition": name, "evaluation": "not measured"})
            continue
        row = {"partition": name, "evaluation": f"#{got['evaluation']} (build {got['build']})"}
        for strat, f in got["strategies"].items():
            c = f["change"]
            row[f"{strat} recall@{effect['k']}"] = f"{f['recall']:.3f}" + (
                f" ({c['delta']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}])" if c else "")
        rows.append(row)
    st.dataframe(rows, hide_index=True, width="stretch", key="wi_recall")
    st.caption(f"On the evaluation set “{md_escape(effect['evaluation'])}”, the newest evaluation measured while "
               "each partition was promoted; in brackets the change against the current partition with its 95 % "
               "paired bootstrap interval. GraphRAG local and global read the Leiden partition, so a variant's "
               "recall is measured by promoting it and re-running the evaluation (Evaluate page); promoting its "
               "before-… snapshot undoes it.")


def _manage(ws, variants) -> None:
    store = R.store()
    with st.expander(f"Saved variants ({len(variants)})"):
        for v in variants:
            a, b = st.columns([5, 1])
            try:
                desc = VariantSettings.from_dict(v.settings).describe()
            except VariantError:
                desc = "settings unreadable"
            snap = " · the partition a promote replaced" if (v.settings or {}).get("snapshot") else ""
            a.markdown(f"**{md_escape(v.name)}** · {md_escape(desc)}{snap} · "
                       f"{v.created_at:%Y-%m-%d %H:%M} UTC · {v.seconds:.1f} s")
            if b.button("Delete", key=f"wi_del_{v.id}", icon=":material/delete:"):
                try:
                    delete_variant(store, R.me(), ws, v.name)
                except access.Refused as exc:
                    st.error(md_escape(str(exc)), icon=":material/block:")
                    return
                st.rerun()
    st.markdown("**Promote a variant** · its communities become the Leiden partition retrieval uses; reports are "
                "written for the new communities and the community vectors replaced. The current partition is "
                "kept as a variant named *before-…*, so promoting that one back undoes it.")
    a, b, c = st.columns([3, 2, 1])
    pick = offered.one(a.selectbox, "Variant to promote", [v.name for v in variants], key="wi_promote_pick")
    sure = b.checkbox("Yes, replace the current partition", key="wi_promote_sure")
    if c.button("Promote", key="wi_promote", icon=":material/upgrade:", disabled=not (pick and sure)):
        try:
            st.session_state.pop(MSG, None)
            job_panel.watch(start_promote(store, R.me(), ws, R.settings(), pick))
        except (VariantError, JobBusy, access.Refused) as exc:
            st.error(md_escape(str(exc)), icon=":material/error:")
            return
        st.session_state.pop("wi_promote_sure", None)
        st.rerun()


def draw(ws) -> None:
    st.caption("Re-run community detection with other settings, compare, and promote the partition you prefer.")
    _form(ws)
    msg = st.session_state.get(MSG)  # how the last job this session started ended, until the next one starts (a job's
    # end reruns the page more than once: a message shown only once would flash and vanish)
    if msg:
        getattr(st, msg[0])(msg[1])
    variants = list_variants(R.store(), ws)
    with st.container(key="wi_compare_box"):
        _compare(ws, variants)
    with st.container(key="wi_recall_box"):
        _recall(ws, variants)
    if variants:
        _manage(ws, variants)
