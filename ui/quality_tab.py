"""The Quality page's Metrics tab: per method and level, the partition's figures (modularity, coverage,
conductance, coherence, Calinski–Harabasz, cluster sparsity, singleton and tiny shares), four plots
(ui/quality_charts.py), and the worst communities first with the reasons they rank low, each one a click away from
the Graph page."""

from __future__ import annotations

import streamlit as st

from core.quality.data import METHODS, EntityBase, LevelData, build_settings, describe, load_base, load_levels
from core.quality.metrics import LevelMetrics, level_metrics
from core.quality.readings import Reference, reading, references
from core.text import truncate
from ui import offered
from ui import quality_charts as charts
from ui import resources as R
from ui.lazy import lazy_expander
from ui.text import md_escape, md_label

FIGURES = [  # (key, label, format, help)
    ("communities", "Communities", "{:,.0f}", "Communities at this level."),
    ("modularity", "Modularity", "{:.3f}", "Weighted modularity of the level's partition on the graph the method "
                                            "clustered (each entity in its community at this level or its deepest "
                                            "one above)."),
    ("coverage", "Coverage", "{:.1%}", "Share of the graph's link weight that lies inside communities."),
    ("conductance_mean", "Mean conductance", "{:.3f}", "Share of a community's link weight that leaves it, "
                                                        "averaged over the communities (lower is better)."),
    ("coherence_mean", "Mean coherence", "{:.3f}", "Mean cosine of the members' embeddings to their centroid, "
                                                   "averaged over communities of two or more."),
    ("calinski_harabasz", "Calinski–Harabasz", "{:,.1f}", "Between- over within-community dispersion of the member "
                                                          "embeddings (higher is better)."),
    ("cluster_sparsity", "Cluster sparsity", "{:.4f}", "HiRAG's CS: share of entity pairs not grouped together."),
    ("singleton_share", "Singletons", "{:.1%}", "Share of communities with one member."),
    ("tiny_share", "Tiny", "{:.1%}", "Share of communities at or below the tiny size (settings.quality.tiny_size)."),
]


@st.cache_resource(show_spinner="Loading the entity graph and its vectors…", max_entries=1)
def entity_base(ws_id: int, version: str, ws_name: str, embedder: str) -> EntityBase:
    return load_base(R.store(), R.vector_index(ws_name, embedder), ws_id)


@st.cache_resource(show_spinner="Reading the method's levels…", max_entries=3)
def method_levels(ws_id: int, version: str, ws_name: str, embedder: str, method: str) -> list[LevelData]:
    store = R.store()
    settings = build_settings(store, ws_id, R.settings())
    return load_levels(store, R.vector_index(ws_name, embedder), ws_id, method, settings,
                       entity_base(ws_id, version, ws_name, embedder))


@st.cache_data(show_spinner=False, max_entries=32)
def level_names(ws_id: int, version: str, ws_name: str, embedder: str, method: str) -> list[int]:
    """The method's levels, coarsest first (kept apart: the levels' data hold three methods at most, and the page's
    first look reads all five)."""
    return [x.level for x in method_levels(ws_id, version, ws_name, embedder, method)]


@st.cache_data(show_spinner="Measuring…", max_entries=64)
def metrics(ws_id: int, version: str, ws_name: str, embedder: str, method: str, level: int) -> LevelMetrics:
    levels = method_levels(ws_id, version, ws_name, embedder, method)
    ld = next(x for x in levels if x.level == level)
    return level_metrics(ld, R.settings().quality)


@st.cache_data(show_spinner=False, max_entries=64)
def summaries(ws_id: int, version: str, ids: tuple[str, ...]) -> dict[str, tuple[str, list[str]]]:
    return describe(R.store(), ws_id, list(ids))


def _figures(m: LevelMetrics, refs: dict[str, Reference]) -> None:
    cols = st.columns(5)
    for i, (key, label, fmt, help_) in enumerate(FIGURES):
        ref = refs.get(key)
        cols[i % 5].metric(label, charts.fmt_value(m.figures.get(key), fmt),
                           help=help_ + (f" Reference: {ref.source}." if ref is not None else ""))
    f = m.figures
    extra = f"{f['vertices']:,.0f} entities at this level"
    if f.get("unclustered"):
        extra += f", {f['unclustered']:,.0f} in no community"
    if f.get("soft_share"):
        extra += f", {f['soft_share']:.1%} of the clustered ones in more than one (soft membership)"
    st.caption(f"{extra}. Median size {charts.fmt_value(f.get('size_median'), '{:,.0f}')}, largest "
               f"{charts.fmt_value(f.get('size_max'), '{:,.0f}')}. {m.note + '. ' if m.note else ''}Measured in {m.seconds:.2f} s.")


@st.cache_data(show_spinner=False, max_entries=64)
def plot_specs(ws_id: int, version: str, ws_name: str, embedder: str, method: str, level: int,
               names: tuple[int, ...]) -> dict[str, dict]:
    """The four plots of a level as Vega-Lite specs, made once per build (altair's chart objects and their schema
    checks took a quarter of a second of every visit)."""
    cfg = R.settings().quality
    args = (ws_id, version, ws_name, embedder, method)
    m = metrics(*args, level)
    refs = references(m.figures, cfg)
    made = {"refs": charts.references_chart(m, refs), "hist": charts.sizes_chart(m, cfg.tiny_size),
            "levels": charts.levels_chart([metrics(*args, lv) for lv in names], refs)}
    if m.table:
        made["scatter"] = charts.scatter_chart(m, cfg.weak_conductance)
    return {name: chart.to_dict() for name, chart in made.items()}


def _plots(specs: dict[str, dict], refs: dict[str, Reference], key: str) -> None:
    top_l, top_r = st.columns(2)
    top_l.vega_lite_chart(specs["refs"], key=f"{key}_refs", width="stretch")
    left, mid = st.columns(2)
    left.vega_lite_chart(specs["hist"], key=f"{key}_hist", width="stretch")
    if "scatter" in specs:
        mid.vega_lite_chart(specs["scatter"], key=f"{key}_scatter", width="stretch")
    top_r.vega_lite_chart(specs["levels"], key=f"{key}_levels", width="stretch")
    with top_r.expander("Where the reference lines come from"):
        st.markdown("\n".join(f"- **{md_escape(r.label)}**: {md_escape(r.source)}" for r in refs.values()))


def _worst(ws, m: LevelMetrics, n: int) -> None:
    t = m.table
    if not t:
        return
    st.markdown(f"**Worst communities first** (the {min(n, len(t['id']))} lowest-ranked of {len(t['id']):,})")
    st.caption("Badness = mean of the community's percentile within this level on conductance (higher is worse), "
               "coherence above chance (lower is worse) and size (smaller is worse); 1 = worst on all three. "
               "Reasons: *tiny* (at most the tiny size), *weakly connected* (conductance at or above the "
               "threshold, or no links), *mixed themes* (members hardly more alike than random entities).")
    top = list(range(min(n, len(t["id"]))))
    texts = summaries(ws.id, R.ws_key(ws), tuple(t["id"][i] for i in top))
    for i in top:
        cid = t["id"][i]
        with st.container(border=True, key=f"q_worst_{i}"):
            a, b = st.columns([5, 1])
            reasons = t["reasons"][i] or ["no flag: it ranks low only against the level's other communities"]
            a.markdown(f"**{i + 1}. {md_label(t['title'][i] or cid, 100)}** · {t['size'][i]:,} members · "
                       f"badness {t['badness'][i]:.2f}")
            a.markdown("; ".join(md_escape(r) for r in reasons))
            if b.button("Open on graph", key=f"q_open_{m.method}_{m.level}_{i}", icon=":material/hub:"):
                st.session_state["graph_focus"] = cid
                st.switch_page("views/graph.py")
            summary, heads = texts.get(cid, ("", []))
            if summary or heads:
                with a, lazy_expander("Report", f"q_report_{m.method}_{m.level}_{cid}") as box:
                    if box.open:
                        st.markdown(md_escape(truncate(summary, 1500)))
                        if heads:
                            st.markdown("\n".join(f"- {md_escape(truncate(h, 200))}" for h in heads[:8]))


def _table(m: LevelMetrics) -> None:
    import pandas as pd

    t = m.table
    if not t:
        return
    df = pd.DataFrame({"title": t["title"], "size": t["size"], "conductance": t["conductance"],
                       "coherence": t["coherence"], "random-group coherence": t["chance"],
                       "badness": t["badness"], "reasons": ["; ".join(r) for r in t["reasons"]], "id": t["id"]})
    # drawn on demand: a data grid anywhere on the page makes the browser load its 1.2 MB script before it draws
    # the page's first plot
    if st.toggle(f"All {len(df):,} communities of this level", key=f"q_all_{m.method}_{m.level}"):
        st.dataframe(df, hide_index=True, width="stretch", height=360)


@st.cache_data(show_spinner="Reading every method…", max_entries=8)
def glance(ws_id: int, version: str, ws_name: str, embedder: str) -> list[str]:
    """One plain line per method the build has, at the level the tab opens on (the coarsest; HiRAG's layer 0)."""
    cfg = R.settings().quality
    out = []
    for method, label in METHODS.items():
        levels = method_levels(ws_id, version, ws_name, embedder, method)
        if levels:
            unit = "layer" if method == "hirag_layers" else "level"
            out.append(reading(f"{label}, {unit} {levels[0].level}",
                               level_metrics(levels[0], cfg, table=False).figures, cfg))
    return out


def draw(ws) -> None:
    cfg = R.settings().quality
    top = st.container(key="q_glance")  # filled last: the chosen method's figures come first on a cold cache
    _method(ws, cfg)
    with top:
        st.markdown("\n".join(f"- {md_escape(line)}" for line in glance(ws.id, R.ws_key(ws), ws.name, ws.embedder)))
        st.caption("Each method at the level this tab opens on; pick one below for its figures and their "
                       "reference lines.")


def _method(ws, cfg) -> None:
    a, b = st.columns([3, 2])
    method = offered.one(a.radio, "Method", list(METHODS), format_func=METHODS.get, horizontal=True, key="q_method")
    names = level_names(ws.id, R.ws_key(ws), ws.name, ws.embedder, method)
    if not names:
        st.info({"leiden": "No Leiden communities in this build.",
                 "hirag": "No HiRAG communities in this build.",
                 "noderag": "No NodeRAG communities in this build.",
                 "attributed": "No attributed (ArchRAG) communities in this build.",
                 "hirag_layers": "No HiRAG summary layers in this build."}.get(method, "Nothing to measure."))
        return
    unit = "layer" if method == "hirag_layers" else "level"
    level = offered.one(b.selectbox, unit.capitalize(), names, key=f"q_level_{method}",
                        format_func=lambda lv: f"{unit} {lv}" + (" (coarsest)" if lv == names[0] and len(names) > 1
                                                                   and method != "hirag_layers" else ""))
    args = (ws.id, R.ws_key(ws), ws.name, ws.embedder, method)
    m = metrics(*args, level)
    refs = references(m.figures, cfg)
    with st.container(key="q_reading"):
        st.markdown("**" + md_escape(reading(f"{METHODS[method]}, {unit} {level}", m.figures, cfg)) + "**")
    with st.container(key="q_figures"):
        _figures(m, refs)
    with st.container(key="q_plots"):
        _plots(plot_specs(*args, level, tuple(names)), refs, f"q_{method}_{level}")
    _worst(ws, m, cfg.worst_listed)
    _table(m)
