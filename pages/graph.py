"""Graph: the heterograph drawn with pyvis (offline), coloured by node kind, capped, with node details."""

from __future__ import annotations

import streamlit as st

from core.graph.display import KIND_COLORS, display_graph, to_pyvis_html
from ui import resources as R

store = R.store()
ws = R.current_workspace()
st.title("Graph")
if ws is None or ws.build_version == 0:
    st.info("Nothing to draw yet: this workspace has not finished a build.")
    st.stop()


@st.cache_data(show_spinner="Drawing the graph…", max_entries=32)
def graph_html(ws_id: int, build_version: int, kinds: tuple[str, ...], limit: int, focus: str | None,
               physics: bool) -> tuple[str, str, dict, list[tuple[str, str, str]]]:
    dg = display_graph(store, ws_id, list(kinds), limit, focus)
    return (to_pyvis_html(dg, height=680, physics=physics), dg.note, dg.available,
            [(n.id, n.kind, n.label) for n in dg.nodes])


default_kinds = ["entity", "community", "document"]
c1, c2, c3 = st.columns([3, 1, 1])
kinds = c1.multiselect("Node kinds", list(KIND_COLORS), default=default_kinds)
limit = c2.slider("Max nodes", 50, 1500, 300, step=50)
physics = c3.toggle("Physics", value=True)
focus = st.session_state.get("graph_focus")

html_doc, note, available, shown = graph_html(ws.id, ws.build_version, tuple(kinds), limit, focus, physics)
legend = " ".join(
    f"<span style='display:inline-block;margin-right:14px'><span style='display:inline-block;width:11px;"
    f"height:11px;border-radius:50%;background:{color};margin-right:5px'></span>{kind} "
    f"({available.get(kind, 0):,})</span>"
    for kind, color in KIND_COLORS.items() if available.get(kind)
)
st.markdown(legend, unsafe_allow_html=True)  # only our own kind names and counts
if note:
    st.caption(note)
if focus:
    st.info("Neighbourhood of the selected node.", icon=":material/filter_center_focus:")
    if st.button("Back to the overview"):
        st.session_state.pop("graph_focus", None)
        st.rerun()
st.iframe(html_doc, height=720)  # the pyvis page is 680 px of canvas plus its margins and border

st.subheader("Node details")
labels = {f"{label} · {kind}": nid for nid, kind, label in shown}
pick = st.selectbox("Pick a drawn node", ["—"] + sorted(labels), index=0)
if pick != "—":
    nid = labels[pick]
    nodes = store.nodes_by_id(ws.id, [nid])
    if nid in nodes:
        n = nodes[nid]
        st.markdown(f"**{n.kind}** · {n.type or ''} · layer {n.layer} · weight {n.weight:g}")
        st.text(n.text[:3000])
        if n.data.get("aliases"):
            st.caption("Merged surface forms: " + ", ".join(sorted(n.data["aliases"])))
    if st.button("Show its neighbourhood", icon=":material/hub:"):
        st.session_state["graph_focus"] = nid
        st.rerun()
