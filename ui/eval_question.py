"""One question of an evaluation opened on the Evaluate page: what each strategy found of its gold documents (the
stored ranks), and every strategy's path drawn side by side on the graph (the Ask page's drawing,
ui/retrieval_view.py) with the gold documents and their chunks highlighted and the gold documents a route missed
drawn apart, beside its local / bridge / global context. The retrievals are made again (core/evaluation/inspect.py),
once per question and build in this session."""

from __future__ import annotations

import streamlit as st

from core.backends.servers import backend_kind
from core.build.factory import make_backend
from core.evaluation.inspect import QuestionView, open_question
from core.models import Evaluation, Workspace
from core.protocols import BackendError
from core.retrieval.base import SECTIONS
from core.workspace import retrieval_llm
from ui import offered
from ui import resources as R
from ui.retrieval_view import panel, path
from ui.retrieval_view import strategy_label as label
from ui.text import md_escape

VIEWS = "ev_question_views"  # session state: {(evaluation, question, build key): QuestionView}


def _view(ws: Workspace, ev: Evaluation, index: int) -> QuestionView | None:
    key = (ev.id, index, R.ws_key(ws))
    kept = st.session_state.setdefault(VIEWS, {})
    if key not in kept:
        s = R.settings().model_copy(deep=True)
        s.backend.kind = backend_kind(ws.backend)  # type: ignore[assignment]
        llm = retrieval_llm(make_backend(s, R.store())) if s.backend.kind != "offline" else None
        try:
            with st.spinner(f"Retrieving with {len(ev.strategies)} strategies…"):
                kept.clear()  # one opened question kept: a view holds every strategy's retrieval
                kept[key] = open_question(R.resources(ws.name, R.ws_key(ws)), ev, index, llm=llm)
        except BackendError as exc:
            st.error(md_escape(str(exc)))
            return None
    return kept[key]


def _found(view: QuestionView, name: str, top: int) -> str:
    ranks = view.found.get(name)
    if ranks is None:
        return "not measured"
    parts = [f"{md_escape(g['key'])}: " + (f"rank {r}" if r else "not found") for g, r in
             zip(view.question["gold"], ranks)]
    hits = sum(1 for r in ranks if 0 < r <= top)
    return f"**{hits}/{len(ranks)}** in the top {top} · " + " · ".join(parts)


def draw(ws: Workspace, ev: Evaluation, index: int) -> None:
    q = ev.questions[index]
    with st.container(border=True, key="ev_question"):
        st.markdown(f"#### Question {md_escape(q['id'])}" + (" · generated" if q.get("generated") else ""))
        st.markdown(md_escape(q["question"]))
        if q.get("answer"):
            st.caption(f"Answer: {md_escape(q['answer'])}")
        st.caption("Gold: " + " · ".join(md_escape(g["key"]) for g in q["gold"]))
        view = _view(ws, ev, index)
        if view is None:
            return
        if view.stale:
            st.caption("The workspace was rebuilt since this evaluation: the paths are today's, the ranks the "
                       "evaluation's.")
        names = offered.many(st.multiselect, "Strategies drawn", list(view.retrievals), default=list(view.retrievals),
                               format_func=label, key=f"ev_q_strats_{ev.id}")
        top, version = max(ev.ks), R.ws_key(ws)
        for row in range(0, len(names), 2):
            for col, name in zip(st.columns(2, gap="medium"), names[row:row + 2]):
                r = view.retrievals[name]
                with col, st.container(border=True, key=f"ev_strategy_{name}"):
                    st.markdown(f"**{md_escape(label(name))}**")
                    st.caption(_found(view, name, top))
                    path(ws.id or 0, version, f"ev_{name}", r, 380, view.gold_nodes, view.gold_documents)
                    for tab, section in zip(st.tabs([f"{s.capitalize()} ({len(r.sections.get(s, []))})"
                                                     for s in SECTIONS]), SECTIONS):
                        with tab:
                            panel(f"ev_{name}", r, section, f"ev_panel_{name}_{section}", 40)
