"""The Evaluate page's Results tab: one evaluation (the newest by default) with what it measured (build version,
backend, embedder, partition, the question set's hash, generated questions labelled), its figures per strategy
(recall@k, MRR, answer-in-context, latency p50 / p95, each with its 95 % bootstrap interval; the dense and BM25
baselines marked; the best strategy of each quality figure starred, with one line per figure saying whether its lead
over the runner-up and over dense is significant: core/evaluation/leads.py) as a table and a plot, which strategies found which gold documents per question (one opened in
ui/eval_question.py), exports, and the offers to resume a stopped evaluation or re-run an outdated one. While the
evaluation runs, the figures so far are drawn again every few seconds."""

from __future__ import annotations

import math

import streamlit as st

from core.evaluation import job, records
from core.evaluation.export import export_csv, export_json
from core.evaluation.leads import Lead, leads, none_significant, reading
from core.evaluation.metrics import per_question, summarize, table_rows
from core.evaluation.records import describe
from core.models import UNFINISHED, Evaluation, EvaluationResult, Workspace
from core.pipeline.runs import JobBusy
from ui import eval_question, guard, job_panel, offered
from ui import resources as R
from ui.retrieval_view import strategy_label as label
from ui.text import md_escape

OPEN = "ev_open"  # session state: the evaluation shown
COLS = ["mrr", "answer_in_context", "latency_ms_p50", "latency_ms_p95"]


def _fmt(v, lo, hi, key: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if key.startswith("latency"):
        return f"{v:,.1f} [{lo:,.1f}, {hi:,.1f}]"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def figures_of(ev: Evaluation, rows: list[EvaluationResult]) -> dict:
    """The stored figures of a finished evaluation, else those of the questions measured so far."""
    return (ev.meta or {}).get("figures") or summarize(ev, rows)


def _table(ev: Evaluation, figures: dict, won: dict[str, Lead]) -> None:
    keys = [f"recall@{k}" for k in ev.ks] + COLS
    body = []
    for row in table_rows(figures, ev.ks):
        cells = {"strategy": label(row["strategy"]) + (f"  ◆ {row['baseline']} baseline" if row["baseline"] else ""),
                 "questions": row["questions"]}
        cells |= {k.replace("_", " "): _fmt(row[k], row[f"{k} low"], row[f"{k} high"], k)
                  for k in keys}
        cells |= {k.replace("_", " "): "★ " + cells[k.replace("_", " ")] for k in keys
                  if k in won and won[k].best == row["strategy"]}
        body.append(cells)
    # every figure column wide enough for "★ 0.625 [0.475, 0.750]" (auto widths gave the long strategy names the
    # room and cut the figures); the strategy stays in view when the table scrolls sideways
    wide = {k.replace("_", " "): st.column_config.TextColumn(width=185 if k.startswith("latency") else 170)
            for k in keys}
    st.container(key="ev_table").dataframe(body, hide_index=True, width="stretch", key="ev_figures",
                                           height=35 * (len(body) + 1) + 3, column_config={
                                               "strategy": st.column_config.TextColumn(pinned=True), **wide})
    st.caption("Each figure with its 95 % bootstrap interval (questions resampled 1,000 times, seeded). recall@k: "
               "the share of a question's gold documents in the strategy's top k; MRR: 1 / the rank of the first "
               "gold document; answer in context: the given answer appears in what was retrieved; latency in ms. "
               "◆ marks the dense and BM25 baselines; ★ the best strategy of each figure.")


def _leads(won: dict[str, Lead], n: int) -> None:
    """One line per figure: who leads, and whether the lead over the runner-up and over dense is real."""
    lines = []
    for lead in won.values():
        weak = [c for c in (lead.over_runner_up, lead.over_dense) if c is not None and not c.significant]
        lines.append("- ★ " + (":orange[not significant] · " if weak else ":green[significant] · ")
                     + md_escape(reading(lead, label)))
    head = ("**Who won** · each lead is the mean per-question difference with its paired 95 % bootstrap interval "
            "(the same questions resampled for both, seeded); an interval that holds 0 is not significant.")
    if none_significant(won):
        head += (f" On these {n} questions no leader is significantly ahead of its runner-up: more questions are "
                 "needed to tell the best apart.")
    with st.container(key="ev_leads"):
        st.markdown(head + "\n\n" + "\n".join(lines))


def _plot(ev: Evaluation, figures: dict) -> None:
    """recall@k per strategy with its interval, in Vega-Lite: a plotly chart here made the browser load plotly's
    4.7 MB script before it drew the figures' table above (about 1.5 s of the page's first drawing)."""
    import altair as alt
    import pandas as pd

    rows = [{"strategy": label(n) + (" ◆" if figures[n].get("baseline") else ""), "k": f"recall@{k}",
             "value": figures[n][f"recall@{k}"]["value"], "low": figures[n][f"recall@{k}"]["low"],
             "high": figures[n][f"recall@{k}"]["high"]} for n in figures for k in ev.ks]
    base = alt.Chart(pd.DataFrame(rows)).encode(x=alt.X("strategy:N", sort=None, title=None,
                                                        axis=alt.Axis(labelAngle=-40, labelLimit=200, labelOverlap=False)),
                                                xOffset=alt.XOffset("k:N", sort=None))
    bars = base.mark_bar().encode(
        y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1.05]), title="recall"), color=alt.Color("k:N", title=None,
                                                                                              sort=None),
        tooltip=["strategy", "k", alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("low:Q", format=".3f"),
                 alt.Tooltip("high:Q", format=".3f")])
    whiskers = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title="recall"), y2="high:Q")
    chart = (bars + whiskers).properties(height=360, title="recall@k by strategy (95 % bootstrap intervals; "
                                                           "◆ baseline)")
    st.altair_chart(chart, key="ev_plot", width="stretch")


def _per_question(ev: Evaluation, rows: list[EvaluationResult]) -> int | None:
    """Which strategies found which gold documents, per question; returns the question chosen to open."""
    pq = per_question(ev, rows)
    top = max(ev.ks)
    table = []
    for i, q in enumerate(ev.questions):
        row = {"#": i, "id": q["id"], "question": q["question"] + ("  (generated)" if q.get("generated") else ""),
               "gold": len(q["gold"])}
        for n in ev.strategies:
            m = pq[n].get(i)
            row[label(n)] = None if m is None else f"{sum(1 for r in m['found'] if 0 < r <= top)}/{len(m['found'])}"
        table.append(row)
    st.markdown(f"**Per question** · gold documents found in each strategy's top {top}")
    st.dataframe(table, hide_index=True, width="stretch", key=f"ev_questions_{ev.id}", column_config={
        "#": st.column_config.NumberColumn(pinned=True), "question": st.column_config.TextColumn(width=520)})
    return offered.maybe(st.selectbox, "Open a question: the best strategies' paths with its gold highlighted",
                        list(range(len(ev.questions))), index=None, key=f"ev_open_q_{ev.id}",
                        placeholder="Choose a question",
                        format_func=lambda i: f"{ev.questions[i]['id']} · {ev.questions[i]['question'][:120]}")


def _offers(ws: Workspace, ev: Evaluation, state: str, done: int) -> None:
    """Resume a stopped evaluation (`done` of its questions measured); re-run one the workspace has changed since."""
    can = guard.allowed(ws, "evaluate")
    if state in ("cancelled", "failed", "interrupted"):
        a, b = st.columns([4, 1], vertical_alignment="center")
        a.warning(f"This evaluation {state} with {done} of {len(ev.questions)} questions measured; resuming measures "
                  "only the rest.", icon=":material/pause_circle:")
        if b.button("Resume", key="ev_resume", icon=":material/play_arrow:", disabled=not can) and \
                guard.check(ws, "evaluate"):
            _start(lambda: (ev, job.resume_evaluation(R.store(), R.me(), ws, R.settings(), ev.id or 0)))
    if state == "done" and records.outdated(ws, ev):
        a, b = st.columns([4, 1], vertical_alignment="center")
        a.info(f"The workspace has changed since this evaluation (build {ev.build_version} → {ws.build_version}: a "
               "rebuild, a merge decision or a promote). Re-run it to see the effect: the two runs then compare "
               "side by side.", icon=":material/update:")
        if b.button("Re-run", key="ev_rerun", icon=":material/replay:", disabled=not can) and \
                guard.check(ws, "evaluate"):
            _start(lambda: job.rerun_evaluation(R.store(), R.me(), ws, R.settings(), ev.id or 0))


def _start(fn) -> None:
    """Start the job `fn` returns as (the evaluation it measures, its run); follow it and show that evaluation."""
    try:
        ev, run = fn()
    except (JobBusy, ValueError) as exc:
        st.error(md_escape(str(exc)), icon=":material/error:")
        return
    job_panel.watch(run)
    st.session_state[OPEN] = ev.id
    st.rerun()


def _body(ws: Workspace, ev: Evaluation, state: str) -> None:
    store = R.store()
    rows = records.results(store, ev)
    done_q = len({r.question for r in rows})
    what = (f"Measured on build {ev.build_version} · backend {md_escape(ev.backend)} · embedder "
            f"{md_escape(ev.embedder)} · partition {md_escape(ev.partition or 'built')} · question set "
            f"`{ev.question_hash[:12]}` · k {', '.join(map(str, ev.ks))} · **{state}**"
            + ("" if state == "done" else f" · {done_q} of {len(ev.questions)} questions measured"))
    st.container(key=f"ev_status_{state}").caption(what)  # the key names the state (a test waits on it)
    _offers(ws, ev, state, done_q)
    if not rows:
        st.info("No question measured yet.")
        return
    figures = figures_of(ev, rows)
    if state != "done":
        st.caption("Figures of the questions measured so far.")
    won = leads(ev, rows)
    _table(ev, figures, won)
    _leads(won, len({r.question for r in rows}))
    _plot(ev, figures)
    opened = _per_question(ev, rows)
    a, b, _ = st.columns([1, 1, 4])
    a.download_button("CSV", data=lambda: export_csv(ev, rows), file_name=f"strata-{ws.name}-evaluation-{ev.id}.csv",
                      mime="text/csv", key="ev_csv", icon=":material/download:", on_click="ignore")
    b.download_button("JSON", data=lambda: export_json(ev, rows), on_click="ignore", icon=":material/download:",
                      file_name=f"strata-{ws.name}-evaluation-{ev.id}.json", mime="application/json", key="ev_json")
    if opened is not None:
        eval_question.draw(ws, ev, opened, rows)


def offer_rerun(ws: Workspace, link: bool = True) -> Evaluation | None:
    """When the workspace changed since its last evaluation (a rebuild, a merge decision, a promote), say so, with
    a link to the Evaluate page (`link`, from another page), where Results offers the re-run. Returns that last
    evaluation (None when there is none)."""
    latest = records.latest_evaluation(R.store(), ws.id or 0)
    if latest is None or latest.status != "done" or not records.outdated(ws, latest):
        return latest
    text = (f"The workspace changed since the last evaluation (“{md_escape(latest.name)}”, build "
            f"{latest.build_version} → {ws.build_version})")
    if link:
        st.page_link("views/evaluate.py", label=f"{text}: re-run it on the Evaluate page", icon=":material/update:")
    else:
        st.info(f"{text}: re-run it from Results to see the effect.", icon=":material/update:")
    return latest


def draw(ws: Workspace) -> None:
    store = R.store()
    evs = records.list_evaluations(store, ws.id or 0)
    if not evs:
        st.info("No evaluation of this workspace yet: bring questions or generate probes in New evaluation.")
        return
    ids = [e.id for e in evs]
    by_id = {e.id: e for e in evs}
    want = st.session_state.get(OPEN)
    if want in ids:
        st.session_state["ev_pick"] = want
    elif st.session_state.get("ev_pick") not in ids:
        st.session_state["ev_pick"] = ids[0]
    pick = offered.one(st.selectbox, "Evaluation", ids, key="ev_pick", format_func=lambda i: describe(by_id[i]))
    st.session_state[OPEN] = pick
    ev = by_id[pick]
    live = records.status(store, ev) in UNFINISHED

    @st.fragment(run_every=3.0 if live else None)
    def body() -> None:
        assert pick is not None
        now = records.get_evaluation(store, ws.id or 0, pick) if live else ev  # polled: read again
        if now is None:
            st.warning("That evaluation is gone.")
            return
        state = records.status(store, now)
        if live and state not in UNFINISHED:
            st.rerun()  # it has ended: the whole page again (no more polling; the job panel goes)
        _body(ws, now, state)

    body()
    with st.expander("Delete this evaluation"):
        if st.button("Delete", key="ev_delete", icon=":material/delete:", disabled=live or not guard.allowed(
                ws, "evaluate")) and guard.check(ws, "evaluate"):
            records.delete_evaluation(store, ws.id or 0, pick or 0)
            st.session_state.pop(OPEN, None)
            st.rerun()
