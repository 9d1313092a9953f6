"""Hierarchy: the community hierarchies and HiRAG's summary layers as a sunburst, treemap or icicle; a click on a
sector (or a pick in the list) opens that community: its report, members by kind, source documents, subgraph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import streamlit as st

from core.explore.community_detail import community_detail
from core.explore.hierarchy import METHODS, find, hierarchy_frame
from core.text import truncate
from ui import offered
from ui import resources as R
from ui.graph_canvas import graph_canvas
from ui.hierarchy_chart import SELECTION, hierarchy_chart
from ui.text import md_escape, md_label

store = R.store()
ws = R.current_workspace()
st.title("Hierarchy")
if ws is None or ws.build_version == 0:
    st.info("Nothing to show yet: this workspace has not finished a build; watch it on the Build page.")
    st.stop()

# A selectbox's format_func is `dict.get` of a dict keyed by the options: Streamlit formats the options (every one a
# key, so never None) and a stale session value (None there makes Streamlit reset the widget, as it always has).
Label = Callable[[str], str]
VIEWS = ["sunburst", "treemap", "icicle"]


def _ws_id(ws_name: str) -> int:
    ws_id = store.require_workspace(ws_name).id
    assert ws_id is not None  # a row read from or written to the store has its key
    return ws_id


@st.cache_data(show_spinner="Reading the hierarchy…", max_entries=32)
def frame(ws_name: str, version: str, method: str, cap: int):
    return hierarchy_frame(store, _ws_id(ws_name), method, max_sectors=cap)


@st.cache_data(show_spinner="Opening…", max_entries=64)
def detail(ws_name: str, version: str, cid: str):
    return community_detail(store, _ws_id(ws_name), cid)


@st.cache_data(show_spinner=False, max_entries=32)
def found_by_title(ws_name: str, version: str, method: str, query: str):
    return find(store, _ws_id(ws_name), method, query)


@st.cache_data(show_spinner=False, max_entries=64)
def stale_reasons(ws_name: str, version: str, cid: str) -> list[str]:
    from core.resolution.review import stale_reasons as reasons

    return reasons(store, _ws_id(ws_name), cid)


@st.cache_data(show_spinner=False, max_entries=16)
def report_markdown(ws_name: str, version: str, cid: str) -> str:
    from core.export import community_markdown

    return community_markdown(store, _ws_id(ws_name), cid)


@st.cache_data(show_spinner=False, max_entries=16)
def document_text(ws_name: str, version: str, doc_id: str) -> tuple[str, str]:
    d = store.documents_by_id(_ws_id(ws_name), [doc_id]).get(doc_id)
    return (d.filename, d.text) if d else ("", "")


def _importance(finding: dict) -> float:
    try:
        return float(finding.get("importance") or 0)
    except (TypeError, ValueError):
        return 0.0


c1, c2, c3 = st.columns([3, 2, 2])
method = offered.one(c1.radio, "Hierarchy", list(METHODS), format_func=METHODS.get, horizontal=True, key="hier_method")
view = offered.one(c2.radio, "View", VIEWS, horizontal=True, key="hier_view")
# 200 sectors first: a sunburst of 800 took the browser seconds to lay out and label (the page's first drawing)
cap = offered.one(c3.select_slider, "Max sectors", [100, 200, 400, 800, 1500, 3000], value=200, key="hier_cap")
fr = frame(ws.name, R.ws_key(ws), method, cap)
if not fr.sectors:
    st.info({"leiden": "No Leiden communities in this build.",
             "hirag": "No HiRAG communities in this build.",
             "noderag": "No NodeRAG communities in this build.",
             "attributed": "No attributed (ArchRAG) communities in this build.",
             "hirag_layers": "No HiRAG summary layers in this build: they are built when the entities show cluster "
                             "structure."}.get(method, "Nothing to draw."))
    st.stop()

layers = method == "hirag_layers"
levels = " · ".join(f"{'layer' if layers else 'level'} {lv}: {n:,}" for lv, n in sorted(fr.per_level.items()))
st.caption(f"{fr.total:,} {'summary entities' if layers else 'communities'} ({levels}). "
           "Click a sector to open it below; the other sectors fade until a click on an empty spot.")
if fr.note:
    st.caption(fr.note)
event = st.altair_chart(hierarchy_chart(fr, view), on_select="rerun", selection_mode=SELECTION,
                        key=f"hier_chart_{method}_{view}", width="stretch")

# a click opens the sector's community; the list below is the same choice by name (and the only one in AppTest)
pick_key = f"hier_pick_{method}"
state: dict[str, Any] = event or {}  # the chart's selection event: {"selection": {SELECTION: [{"id": ...}]}}
points = (state.get("selection") or {}).get(SELECTION) or []
clicked = fr.target(points[0].get("id")) if points else None
if clicked and clicked != st.session_state.get(f"{pick_key}_click"):
    st.session_state[f"{pick_key}_click"] = clicked
    st.session_state[pick_key] = clicked
left, right = st.columns([3, 1])
query = right.text_input("Find by title", key=f"hier_find_{method}", placeholder="part of a title")
found = found_by_title(ws.name, R.ws_key(ws), method, query.strip()) if query.strip() else []
if query.strip() and not found:
    right.caption("No title contains that.")
labels = {s.id: f"{truncate(s.title, 80) or 'untitled'} · "
                f"{'layer' if s.kind == 'summary' else 'level'} {s.level} · {s.size:,} members"
          for s in found + fr.choices()}  # matches first, then every drawn sector
if st.session_state.get(pick_key) not in labels:
    st.session_state[pick_key] = None  # nothing open (or no longer offered)
pick = offered.one(left.selectbox, "Open a summary entity" if layers else "Open a community", list(labels),
                      format_func=cast(Label, labels.get), key=pick_key, placeholder="Click a sector, or pick one here")
if pick is None:
    st.stop()

det = detail(ws.name, R.ws_key(ws), pick)
if det is None:
    st.info("That community is no longer stored (the workspace was rebuilt).")
    st.stop()

with st.container(border=True, key="hier_detail"):
    st.markdown(f"### {md_label(det.title or 'Untitled', 160)}")
    facts = [METHODS.get(det.method, det.method),
             f"layer {det.level}" if det.kind == "summary" else f"level {det.level}", f"{det.size:,} members"]
    if det.report.get("rating") is not None:
        facts.append(f"rating {det.report['rating']}")
    st.caption(" · ".join(facts))
    stale = stale_reasons(ws.name, R.ws_key(ws), pick) if det.kind == "community" else []
    if stale:
        st.warning("stale: entity merges since this report was written; the next build rewrites it (" + "; ".join(
            md_label(r, 120) for r in stale[:5]) + (f"; {len(stale) - 5} more" if len(stale) > 5 else "") + ")",
            icon=":material/history:")
    if det.summary:
        st.markdown(md_escape(det.summary))
    if det.parent is not None and det.parent[0] in labels:
        st.button(f"Up to {md_label(det.parent[1] or 'its parent', 70)}", icon=":material/arrow_upward:",
                  on_click=st.session_state.__setitem__, args=(pick_key, det.parent[0]))
    if det.children:
        st.caption("Inside: " + ", ".join(f"{md_label(t or 'untitled', 50)} ({n:,})" for _, t, n in det.children[:12])
                   + (f", and {len(det.children) - 12} more" if len(det.children) > 12 else ""))

    tab_report, tab_members, tab_sources, tab_graph = st.tabs(["Report", "Members", "Sources", "Subgraph"])
    with tab_report:
        findings = sorted((f for f in det.report.get("findings") or [] if isinstance(f, dict)),
                          key=lambda f: -_importance(f))
        if not findings:
            st.caption("No findings: " + ("summary entities carry a description, not a report."
                                          if det.kind == "summary" else "this community has no report yet."))
        for f in findings:
            st.markdown(f"**{md_label(f.get('summary') or 'finding', 200)}** · importance {f.get('importance', '—')}")
            if f.get("explanation"):
                st.markdown(md_escape(f["explanation"]))
        if det.report.get("keywords"):
            st.caption("Keywords: " + md_escape(", ".join(str(k) for k in det.report["keywords"])))
        if det.kind == "community":
            st.download_button("Download report (Markdown)", report_markdown(ws.name, R.ws_key(ws), pick),
                               file_name=f"community-{pick}.md", mime="text/markdown", key=f"hier_md_{pick}",
                               icon=":material/download:", on_click="ignore")
    with tab_members:
        for kind, items in det.members.items():
            total = det.counts.get(kind, len(items))
            st.markdown(f"**{md_escape(kind.capitalize())}** ({total:,})")
            st.dataframe([{"name": m.title, "type": m.type, "weight": round(m.weight, 2), "description": m.text}
                          for m in items], hide_index=True, width="stretch", height=min(38 + 35 * len(items), 320))
            if total > len(items):
                st.caption(f"the {len(items):,} with the most weight of {total:,}")
    with tab_sources:
        if not det.documents:
            st.caption("No document mentions these members.")
        else:
            st.caption(f"{det.n_documents:,} document(s) mention its members; the ones holding the most mentions "
                       "come first.")
            st.dataframe([{"document": d.title, "file": d.filename, "mentions": d.mentions, "members": d.members}
                          for d in det.documents], hide_index=True, width="stretch")
            doc_titles = {d.id: f"{truncate(d.title, 80)} · {d.mentions} mentions" for d in det.documents}
            read = offered.one(st.selectbox, "Read a source document", list(doc_titles), format_func=cast(Label, doc_titles.get),
                                key=f"hier_read_{pick}")
            filename, body = document_text(ws.name, R.ws_key(ws), read)
            st.caption(md_escape(filename) + (f" · first 20,000 of {len(body):,} characters" if len(body) > 20000
                                              else ""))
            st.text(body[:20000])
    with tab_graph:
        if det.graph:
            if det.graph_note:
                st.caption(det.graph_note)
            graph_canvas(det.graph, key="hierarchy_subgraph")
        else:
            st.caption("No member entities to draw.")
