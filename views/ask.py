"""Ask: a question, a strategy, the answer beside its local / bridge / global context and its sources."""

from __future__ import annotations

import streamlit as st

from core.backends.base import BackendError
from core.pipeline import make_backend
from core.retrieval.base import SECTIONS, get_strategy, strategy_names
from core.workspace import ask
from ui import resources as R
from ui.text import md_escape, md_label

store, settings = R.store(), R.settings()
ws = R.current_workspace()
st.title("Ask")
if ws is None or ws.build_version == 0:
    st.info("This workspace has not finished a build yet; watch it on the Build page.")
    st.stop()

SECTION_HELP = {"local": "Detail", "bridge": "Connection", "global": "Overview"}

names = strategy_names()
with st.form("ask"):
    q = st.text_area("Question", key="question", height=80,
                     placeholder="e.g. Which university trained the engineer who designed the barrier's gates?")
    strategy = st.selectbox("Strategy", names, index=names.index("hirag") if "hirag" in names else 0,
                            format_func=lambda n: get_strategy(n).label)
    submitted = st.form_submit_button("Ask", type="primary", icon=":material/send:")

if submitted:
    if not q.strip():
        st.warning("Type a question first.")
    else:
        res = R.resources(ws.name, ws.build_version)
        answer_settings = settings.model_copy(deep=True)
        answer_settings.backend.kind = "ollama" if ws.backend == "ollama" else "offline"
        try:
            with st.spinner("Retrieving and answering…"):
                r, a = ask(res, make_backend(answer_settings, store), q, strategy)
            st.session_state["last_answer"] = (ws.name, r, a.text)
        except BackendError as exc:
            st.error(str(exc))

last = st.session_state.get("last_answer")
if last is not None and last[0] == ws.name:  # the last answer of this workspace, not another's
    _, r, text = last
    strat = get_strategy(r.strategy)
    st.markdown(f"#### Answer · {strat.label}")
    st.markdown(md_escape(text))
    st.caption(strat.description)
    cols = st.columns(3)
    for col, name in zip(cols, SECTIONS):
        items = r.sections[name]
        with col:
            with st.container(border=True, key=f"panel_{name}"):
                st.markdown(f"**{name.capitalize()}** · {SECTION_HELP[name]} ({len(items)})")
                if not items:
                    st.caption("Nothing at this level for this strategy.")
                for it in items[:12]:
                    with st.expander(f"{md_label(it.title, 70)} · {it.kind} · {it.score:.2f}"):
                        st.markdown(md_escape(it.text[:1500]))
                        st.caption(f"node {it.id}" + (f" · level {it.level}" if it.level is not None else ""))
                if len(items) > 12:
                    st.caption(f"and {len(items) - 12} more")  # (a leading "+ " would render as a list)
    st.markdown("#### Sources")
    docs = store.documents_by_id(ws.id, [s.document_id for s in r.sources])
    chunk_nodes = store.nodes_by_id(ws.id, [s.chunk_ids[0] for s in r.sources if s.chunk_ids])
    for i, s in enumerate(r.sources, 1):
        d = docs.get(s.document_id)
        with st.expander(f"[{i}] {md_label(s.title, 90)} · {s.score:.2f}"):
            if s.chunk_ids and s.chunk_ids[0] in chunk_nodes:
                st.markdown("**Best chunk**")
                st.text(chunk_nodes[s.chunk_ids[0]].text[:3000])
            if d is not None:
                st.caption(md_escape(d.filename + (f" · id {d.external_id}" if d.external_id else "")))
    with st.expander("Path and trace"):
        st.json({"path": r.to_dict()["path"], "trace": r.trace}, expanded=False)
