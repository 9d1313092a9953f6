"""Graph: the heterograph drawn with pyvis (offline), coloured by node kind, capped, with node details."""

from __future__ import annotations

import streamlit as st

from core.graph.display import KIND_COLORS, describe_node, display_graph, search_nodes, to_pyvis_html
from ui import resources as R
from ui.text import md_escape, md_label

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
    for kind, color in KIND_COLORS.items() if kind in kinds and available.get(kind)
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

st.subheader("Find a node")
a, b = st.columns(2)
query = a.text_input("Search entities and communities by name", placeholder="e.g. Okafor")
matches = search_nodes(store, ws.id, query) if query else []
options = {f"{md_label(title, 70)} · {kind}": nid for nid, kind, title in matches}
drawn = {f"{md_label(label, 70)} · {kind}": nid for nid, kind, label in shown}
pick = b.selectbox("…or pick a drawn node", ["—"] + sorted(drawn))
nid = options[a.selectbox("Matches", list(options))] if options else (drawn.get(pick) if pick != "—" else None)
if query and not options:
    a.caption("No entity or community with that name.")

if nid:
    det = describe_node(store, ws.id, nid)
    if det is not None:
        st.markdown(f"#### {md_label(det.title, 120)}")
        st.caption(md_escape(" · ".join(det.facts)))
        st.text(det.text[:3000])
        for kind, items in det.neighbours.items():
            st.markdown(f"**{kind}** ({len(items)}): " + ", ".join(md_label(t, 50) for _, t in items))
        if st.button("Draw its neighbourhood", icon=":material/hub:"):
            st.session_state["graph_focus"] = nid
            st.rerun()
