"""Ask: a question put to one to three strategies side by side. Each opens with its answer block (offline the best
evidence, quoted with its document, saying no model wrote it; with a model its answer and what it cites) and the
evidence chain drawn small; then its local / bridge / global context (every item names its node and its score's
meaning, one click shows it on the Graph page), its sources (best chunk and document), its timings, and the whole
path it took on the graph one switch away. The picker offers the designs; the ablations behind a research switch.
Below: what each strategy's sections mean, and the workspace's query history (the answer shown; re-open in the
order picked, JSON export). Logic lives in core/ (workspace.ask, answer, explore/evidence, chain, strategies,
route, history)."""

from __future__ import annotations

import re

import streamlit as st

from core import access
from core.answer import recorded
from core.backends.servers import backend_kind
from core.explore.strategies import ablations, designs, is_ablation, source_score
from core.history import count_queries, export_json, list_queries, open_query
from core.pipeline.factory import make_backend
from core.protocols import BackendError
from core.retrieval.base import SECTIONS, Retrieval
from core.text import truncate
from core.workspace import ask
from ui import offered
from ui import resources as R
from ui.lazy import close_lazy, lazy_expander
from ui.retrieval_view import (
    answer_block,
    by_model,
    chain_view,
    panel,
    path,
    show_on_graph,
    strategy_about,
)
from ui.text import md_answer, md_escape, md_label

store, settings = R.store(), R.settings()
ws = R.current_workspace()
st.title("Ask")
if ws is None or ws.build_version == 0:
    st.info("This workspace has not finished a build yet; watch it on the Build page.")
    st.stop()
assert ws.id is not None  # a row read from or written to the store has its key
ws_id: int = ws.id
ws_name: str = ws.name
version = R.ws_key(ws)  # cache key: this workspace (id, creation) and build

_SECTION_NAME = re.compile(r"(^|; )((?:local|bridge|global)(?: and (?:local|bridge|global))*):")
RESULTS = "ask_results"  # session state: (workspace name, [(Retrieval, answer text), ...])
KEPT = "ask_form"  # session state: the question and strategies last asked (widget state is dropped off the page)


def _sources(i: int, r: Retrieval, width: int) -> None:
    st.markdown("#### Sources")
    if not r.sources:
        st.caption("No sources.")
    for k, s in enumerate(r.sources, 1):
        with lazy_expander(f"[{k}] {md_label(s.title, width)}", f"src_{i}_{k}") as box:
            if not box.open:  # a closed source reads nothing from the store
                continue
            d = store.documents_by_id(ws_id, [s.document_id]).get(s.document_id)
            chunks = store.nodes_by_id(ws_id, s.chunk_ids[:1])
            if d is not None:
                st.caption(md_escape(d.filename + (f" · id {d.external_id}" if d.external_id else "")
                                     + f" · {source_score(r, s)}"))
            chunk_tab, doc_tab = st.tabs(["Best chunk", "Document"])
            with chunk_tab:
                c = chunks.get(s.chunk_ids[0]) if s.chunk_ids else None
                st.text(c.text[:3000] if c is not None else "(no chunk recorded)")
                if c is not None:
                    st.caption(f"chunk {md_escape(c.id)} · {len(s.chunk_ids)} chunk(s) of this document "
                               "back the context")
            with doc_tab:
                if d is None:
                    st.caption("The document is no longer in the workspace.")
                else:
                    st.text(d.text[:3000] + ("…" if len(d.text) > 3000 else ""))
                    show_on_graph(d.id, f"godoc_{i}_{k}")


def _timings(r: Retrieval) -> None:
    t = r.trace.get("timings_ms", {})

    def ms(v: float) -> str:
        return f"{v:,.0f} ms" if v >= 10 else f"{v:.1f} ms"

    steps = " · ".join(f"{k} {ms(v)}" for k, v in t.items() if k not in ("retrieval_total", "answer", "evidence"))
    total = f"retrieval {ms(t['retrieval_total'])}" if "retrieval_total" in t else ""
    answer = f"answer {ms(t['answer'])}" if "answer" in t else ""
    answer += f" (best evidence and chain {ms(t['evidence'])})" if answer and "evidence" in t else ""
    st.caption("Timings: " + " · ".join(x for x in (steps, total, answer) if x))
    if "llm" in r.trace:  # the strategy's own language steps ran on the model, not extractively
        calls = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.trace["llm"].items() if k != "model")
        st.caption(f"Model steps: {md_escape(str(r.trace['llm']['model']))}" + (f" ({calls})" if calls else ""))
    with st.expander("Path and trace (JSON)"):
        st.json({"path": r.to_dict()["path"], "trace": r.trace}, expanded=False)


def _explained(r: Retrieval, text: str):
    """The result's best evidence and chain; a result from before they were recorded has them made now."""
    return recorded(R.resources(ws_name, version) if "evidence" not in r.trace else None, r, text, by_model(r))


def _levels(r: Retrieval, text: str) -> None:
    """The offline answer's one line per level (what each level's best sentence was), kept apart from the answer."""
    if not by_model(r):
        with st.expander("What each level found (local, bridge, global)"):
            st.markdown(md_answer(text))


def _answer(i: int, r: Retrieval, text: str, wide: bool, question: bool) -> None:
    """The answer block of `r` and its chain (and, wide, everything else beside it)."""
    label, description = strategy_about(r.strategy)
    st.markdown(f"#### Answer · {label}")
    if question:  # results re-opened together may answer different questions
        st.caption(f"Question: {md_escape(r.question)}")
    evidence, chain = _explained(r, text)
    if wide:
        left, right = st.columns([3, 2])
        with left:
            answer_block(i, r, text, evidence)
        with right:
            chain_view(i, chain)
    else:
        answer_block(i, r, text, evidence)
        chain_view(i, chain, 170)
    _levels(r, text)
    if description:
        st.caption(md_escape(description))
    if wide:
        _details(i, r, True)


@st.fragment  # opening one of its items (drawn only when opened) reruns this strategy's details alone
def _details(i: int, r: Retrieval, wide: bool) -> None:
    """What `r` retrieved at each level, its sources and timings (and, wide, its whole path on demand)."""
    if wide:
        for col, section in zip(st.columns(3), SECTIONS):
            with col:
                panel(i, r, section, f"panel_{section}", 70)
        left, right = st.columns([5, 6])
        with left:
            _sources(i, r, 90)
        with right:
            _timings(r)
            if st.toggle("Show the whole retrieval path", key=f"whole_path_{i}",
                         help="Every node the strategy visited, drawn on the graph."):
                path(ws_id, version, i, r, 460)
    else:
        tabs = st.tabs([f"{s.capitalize()} ({len(r.sections.get(s, []))})" for s in SECTIONS])
        for tab, section in zip(tabs, SECTIONS):
            with tab:
                panel(i, r, section, f"panel_{i}_{section}", 44)
        _sources(i, r, 50)
        _timings(r)


def _keep_offered(options: list[str]) -> None:
    """The chosen strategies kept to those offered (the ablations leave the picker when their switch goes off)."""
    if "strategies" in st.session_state:  # written only when it changes: a write sends the value to the browser,
        kept = [n for n in st.session_state["strategies"] if n in options]  # over strategies picked and not yet asked
        if kept != st.session_state["strategies"]:
            st.session_state["strategies"] = kept


kept = st.session_state.get(KEPT)
if kept and "question" not in st.session_state:  # back on the page: the form as it was when last asked
    st.session_state["question"] = kept[0]
    st.session_state["strategies"] = list(kept[1])
    st.session_state["ask_ablations"] = any(is_ablation(n) for n in kept[1])
research = st.toggle("Research: ablations", key="ask_ablations",
                     help="Also offer the ablations (HiRAG's levels alone, sources by similarity, HLG's blended "
                          "rerank and path beam): variants measured against the designs, not designs of their own.")
names = designs() + (ablations() if research else [])
_keep_offered(names)
with st.form("ask"):
    q = st.text_area("Question", key="question", height=80,
                     placeholder="e.g. Which university trained the engineer who designed the barrier's gates?")
    chosen = offered.many(st.multiselect, "Strategies", names, default=None if "strategies" in st.session_state else
                            names[:1],  # the first design: HiRAG
                            max_selections=3, key="strategies", format_func=lambda n: strategy_about(n)[0],
                            help="Up to three, answered side by side on the same question.")
    submitted = st.form_submit_button("Ask", type="primary", icon=":material/send:")

with st.expander("What local, bridge and global mean for each strategy"):  # the strategies offered
    st.markdown("\n".join(f"- **{md_escape(strategy_about(n)[0])}** (`{n}`): " + _SECTION_NAME.sub(
        r"\1*\2*:", md_escape(strategy_about(n)[1])) for n in names))

if submitted:
    if not q.strip():
        st.warning("Type a question first.")
    elif not chosen:
        st.warning("Choose at least one strategy.")
    else:
        answer_settings = settings.model_copy(deep=True)
        answer_settings.backend.kind = backend_kind(ws.backend)  # type: ignore[assignment]
        backend, done = make_backend(answer_settings, store), []
        try:
            res = R.resources(ws.name, R.ws_key(ws))  # an unreachable vector server: BackendError, one line
            for name in chosen:
                with st.spinner(f"Retrieving and answering with {strategy_about(name)[0]}…"):
                    r, a = ask(res, backend, q, name, asked_by=R.me())
                done.append((r, a.text))
        except BackendError as exc:
            st.error(md_escape(str(exc)))
        if done:
            close_lazy()
            st.session_state[RESULTS] = (ws.name, done)
            st.session_state[KEPT] = (q, list(chosen))

shown = st.session_state.get(RESULTS)
if shown is not None and shown[0] == ws.name:  # the last answers of this workspace, not another's
    results = shown[1]
    one_question = len({r.question for r, _ in results}) == 1
    if one_question:
        st.markdown(f"**Question:** {md_escape(results[0][0].question)}")
    if len(results) == 1:
        r, text = results[0]
        _answer(0, r, text, wide=True, question=False)
    else:
        # the answers side by side first, then what each retrieved: the answers reach the browser before the
        # hundreds of elements of the context panels and sources, and every strategy's panels start level
        for i, (col, (r, text)) in enumerate(zip(st.columns(len(results), gap="medium"), results)):
            with col, st.container(key=f"answer_{i}"):
                _answer(i, r, text, wide=False, question=not one_question)
        for i, (col, (r, _)) in enumerate(zip(st.columns(len(results), gap="medium"), results)):
            with col, st.container(key=f"details_{i}"):
                _details(i, r, wide=False)
        # the whole paths full width, one tab per strategy, on demand: a third of the page is too narrow for a
        # 100-node route, and drawn by default they pushed everything else thousands of pixels down
        if st.toggle("Show the whole retrieval paths", key="whole_paths",
                     help="Every node each strategy visited, drawn on the graph, one tab per strategy."):
            for i, (tab, (r, _)) in enumerate(zip(st.tabs([f"Path · {strategy_about(r.strategy)[0]}"
                                                           for r, _ in results]), results)):
                with tab, st.container(key=f"path_{i}"):
                    path(ws_id, version, i, r, 520)

st.divider()
st.subheader("History")
only = access.history_of(store, R.me(), ws)  # on a workspace shared with everyone: one's own questions only
entries = list_queries(store, ws_id, 50, only)
if not entries:
    st.caption("No question asked in this workspace yet.")
else:
    total = count_queries(store, ws_id, only)
    by_whom = any(e.asked_by for e in entries)  # a team's workspace (sign-in on): who asked each question
    st.dataframe([{"asked (UTC)": e.created_at.strftime("%Y-%m-%d %H:%M:%S")} | (
                      {"asked by": e.asked_by or ""} if by_whom else {}) | {
                   "strategy": e.strategy, "question": e.question, "answer": truncate(e.answer, 140),
                   "retrieval ms": round(e.ms, 1), "sources": e.n_sources} for e in entries],
                 hide_index=True, width="stretch", key="history_table")
    st.caption(f"{total:,} question(s) asked in this workspace" + (" by you" if only else "")
               + (", the latest 50 shown." if total > 50 else "."))
    by_id = {e.id: e for e in entries}
    pick_col, open_col, save_col = st.columns([5, 2, 2], vertical_alignment="bottom")
    picked = offered.many(pick_col.multiselect, "Re-open past results (up to three, side by side)", list(by_id), max_selections=3,
                           key="history_pick", format_func=lambda i: f"#{i} · {by_id[i].strategy} · "
                           f"{truncate(by_id[i].question, 80)}")
    if open_col.button("Re-open", key="history_open", disabled=not picked, icon=":material/history:"):
        opened = [x for x in (open_query(store, ws_id, i, only) for i in picked) if x is not None]
        if opened:
            close_lazy()
            st.session_state[RESULTS] = (ws.name, opened)
            st.rerun()
        st.warning("Those results can no longer be read.")
    save_col.download_button("Download JSON", data=lambda: export_json(store, ws_id, only), on_click="ignore",
                      file_name=f"strata-{ws.name}-queries.json", mime="application/json",
                      icon=":material/download:", key="history_download")

R.warm_up(ws, names[:1])  # the page is drawn: the default strategy's resources load while the question is typed
