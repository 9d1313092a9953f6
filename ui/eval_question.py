"""One question of an evaluation opened on the Evaluate page: what each strategy found of its gold documents (the
stored ranks, every strategy, one table), and the paths of the best strategies by the evaluation's main figure and
dense (core/evaluation/leads.py best_strategies) drawn side by side on the graph (the Ask page's drawing,
ui/retrieval_view.py) with the gold documents and their chunks highlighted and the gold documents a route missed
drawn apart, and on demand its local / bridge / global context; any other strategy is drawn when chosen. The retrievals
are made again (core/evaluation/inspect.py), once per question, strategy and build in this session."""

from __future__ import annotations

import streamlit as st

from core.backends.servers import backend_kind
from core.evaluation.inspect import QuestionView, open_question, retrieve
from core.evaluation.leads import best_strategies
from core.models import Evaluation, EvaluationResult, Workspace
from core.pipeline.factory import make_backend
from core.protocols import BackendError
from core.retrieval.base import SECTIONS
from core.workspace import retrieval_llm
from ui import offered
from ui import resources as R
from ui.retrieval_view import panel, path
from ui.retrieval_view import strategy_label as label
from ui.text import md_escape

VIEWS = "ev_question_views"  # session state: {(evaluation, question, build key): QuestionView}


def _view(ws: Workspace, ev: Evaluation, index: int, names: list[str]) -> QuestionView | None:
    """The question's view holding the retrievals of `names` (those it lacks made now)."""
    key = (ev.id, index, R.ws_key(ws))
    kept = st.session_state.setdefault(VIEWS, {})
    view = kept.get(key)
    missing = [n for n in names if view is None or n not in view.retrievals]
    if not missing:
        return view
    s = R.settings().model_copy(deep=True)
    s.backend.kind = backend_kind(ws.backend)  # type: ignore[assignment]
    llm = retrieval_llm(make_backend(s, R.store())) if s.backend.kind != "offline" else None
    res = R.resources(ws.name, R.ws_key(ws))
    try:
        with st.spinner(f"Retrieving with {len(missing)} strateg{'y' if len(missing) == 1 else 'ies'}…"):
            if view is None:
                kept.clear()  # one opened question kept
                view = open_question(res, ev, index, names, llm=llm)
            else:
                retrieve(res, ev, view, names, llm=llm)
    except BackendError as exc:
        st.error(md_escape(str(exc)))
        return None
    kept[key] = view
    return view


def _ranks(ev: Evaluation, q: dict, found: dict[str, list[int]], top: int) -> None:
    """Every strategy's stored ranks of the question's gold documents: one row each, drawn or not."""
    rows = []
    for name in ev.strategies:
        ranks = found.get(name)
        row = {"strategy": label(name), f"gold in top {top}": "not measured" if ranks is None else
               f"{sum(1 for r in ranks if 0 < r <= top)}/{len(ranks)}"}
        for g, r in zip(q["gold"], ranks or []):
            row[g["key"]] = f"rank {r}" if r else "not found"
        rows.append(row)
    with st.expander(f"What each of the {len(ev.strategies)} strategies found (stored ranks)"):
        st.dataframe(rows, hide_index=True, width="stretch", key=f"ev_q_ranks_{ev.id}")


def _found(view: QuestionView, name: str, top: int) -> str:
    ranks = view.found.get(name)
    if ranks is None:
        return "not measured"
    parts = [f"{md_escape(g['key'])}: " + (f"rank {r}" if r else "not found") for g, r in
             zip(view.question["gold"], ranks)]
    hits = sum(1 for r in ranks if 0 < r <= top)
    return f"**{hits}/{len(ranks)}** in the top {top} · " + " · ".join(parts)


def draw(ws: Workspace, ev: Evaluation, index: int, rows: list[EvaluationResult]) -> None:
    q = ev.questions[index]
    top = max(ev.ks)
    with st.container(border=True, key="ev_question"):
        st.markdown(f"#### Question {md_escape(q['id'])}" + (" · generated" if q.get("generated") else ""))
        st.markdown(md_escape(q["question"]))
        if q.get("answer"):
            st.caption(f"Answer: {md_escape(q['answer'])}")
        st.caption("Gold: " + " · ".join(md_escape(g["key"]) for g in q["gold"]))
        _ranks(ev, q, {r.strategy: list(r.found) for r in rows if r.question == index}, top)
        skey = f"ev_q_strats_{ev.id}"
        a, b = st.columns([5, 1], vertical_alignment="bottom")
        if skey not in st.session_state:  # the best by default; the rest one click away
            st.session_state[skey] = best_strategies(ev, rows)
        if b.button(f"Draw all {len(ev.strategies)}", key=f"ev_q_all_{ev.id}", icon=":material/select_all:"):
            st.session_state[skey] = list(ev.strategies)
        with a:
            names = offered.many(st.multiselect, f"Strategies drawn (by default the 3 best by recall@{top}, and "
                                 "dense)", list(ev.strategies), format_func=label, key=skey)
        view = _view(ws, ev, index, names)
        if view is None:
            return
        if view.stale:
            st.caption("The workspace was rebuilt since this evaluation: the paths are today's, the ranks the "
                       "evaluation's.")
        version = R.ws_key(ws)
        context = st.toggle("Show each strategy's local / bridge / global context", key="ev_q_context")
        for row in range(0, len(names), 2):
            for col, name in zip(st.columns(2, gap="medium"), names[row:row + 2]):
                r = view.retrievals[name]
                with col, st.container(border=True, key=f"ev_strategy_{name}"):
                    st.markdown(f"**{md_escape(label(name))}**")
                    st.caption(_found(view, name, top))
                    path(ws.id or 0, version, f"ev_{name}", r, 380, view.gold_nodes, view.gold_documents)
                    if not context:  # (on demand: a few hundred items a page, drawn only when asked)
                        continue
                    for tab, section in zip(st.tabs([f"{s.capitalize()} ({len(r.sections.get(s, []))})"
                                                     for s in SECTIONS]), SECTIONS):
                        with tab:
                            panel(f"ev_{name}", r, section, f"ev_panel_{ev.id}_{index}_{name}_{section}", 40)
