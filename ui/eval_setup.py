"""The Evaluate page's New evaluation tab: the questions, brought (a questions file: jsonl, csv or a JSON list, the
format `python -m core eval` reads, with an example to download; rows naming no known document listed with the
reason and left out) or made (a probe set from the workspace: core/evaluation/probes.py, worded by the model when
the workspace was built with one), editable before running (drop a question, fix its text or answer); then the
strategies and ks, and the run: an "evaluate" job of the background worker (core/evaluation/job.py)."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from core.backends.servers import backend_kind
from core.evaluation import job, probes, questions, records
from core.models import Workspace
from core.pipeline.factory import make_backend
from core.pipeline.runs import JobBusy
from core.retrieval.base import strategy_names
from ui import guard, job_panel, offered
from ui import resources as R
from ui.retrieval_view import strategy_label
from ui.text import md_escape

TAB = "ev_tab"  # the Evaluate page's tabs (views/evaluate.py)
NEXT_TAB = "ev_tab_next"  # the tab to open at the next run (a run started opens Results)
DRAFT = "ev_draft"  # session state: {"ws": name, "source": what made it, "questions": [...], "rejected": [...]}
FORMAT_HELP = """A row is one question: **question** (required), **answer** (optional: the page then reports whether
the answer appears in what each strategy retrieved), **id** (optional), and its gold documents by **gold_titles**
(document titles), **gold_ids** (external ids, as `python -m core eval` reads) or **gold_files** (file names), or
**gold** (any of the three). JSON lines or a JSON list take lists; in CSV separate several with `|`. Rows whose gold
names no document of this workspace are listed with the reason and left out; nothing else is refused."""


def _draft(ws: Workspace) -> dict | None:
    d = st.session_state.get(DRAFT)
    return d if d is not None and d.get("ws") == ws.name else None


def _brought(ws: Workspace) -> None:
    st.markdown(FORMAT_HELP)
    a, b, _ = st.columns([1, 1, 3])
    for col, fmt in ((a, "jsonl"), (b, "csv")):
        col.download_button(f"Example ({fmt})", data=questions.example_file(R.store(), ws.id or 0, fmt),
                            file_name=f"strata-questions-example.{fmt}", key=f"ev_example_{fmt}", on_click="ignore",
                            icon=":material/download:", mime="text/csv" if fmt == "csv" else "application/json")
    up = st.file_uploader("Questions file", type=["jsonl", "json", "csv"], key=f"ev_upload_{ws.name}")
    if up is None:
        return
    sig = (up.name, up.size, getattr(up, "file_id", ""))
    d = _draft(ws)
    if d is not None and d.get("sig") == sig:
        return  # this file was read already (the draft may have been edited since)
    qs = questions.read_questions(R.store(), ws.id or 0, up.getvalue(), up.name)
    st.session_state[DRAFT] = {"ws": ws.name, "sig": sig, "source": f"file {up.name}", "questions": qs.questions,
                               "rejected": [asdict(r) for r in qs.rejected]}


def _made(ws: Workspace) -> None:
    model = backend_kind(ws.backend) != "offline"
    st.caption("Questions made from this workspace, for when you hold no gold set: **multi-hop** ones join two "
               "documents through an entity they share (both are the gold), **single-hop** ones ask for a "
               "statement's object (its document is the gold). The gold is right by construction; the wording is "
               + ("the model's (this workspace was built with one)." if model else "a template's (offline)."))
    with st.form("ev_probe_form"):
        c = st.columns(3)
        n_multi = c[0].number_input("Multi-hop", 0, 200, 10, key="ev_n_multi")
        n_single = c[1].number_input("Single-hop", 0, 200, 10, key="ev_n_single")
        seed = c[2].number_input("Seed", 0, 10**6, 0, key="ev_seed", help="The same seed makes the same set.")
        made = st.form_submit_button("Generate probes", icon=":material/auto_awesome:")
    if not made:
        return
    backend = None
    if model:
        s = R.settings().model_copy(deep=True)
        s.backend.kind = backend_kind(ws.backend)  # type: ignore[assignment]
        backend = make_backend(s, R.store())
    with st.spinner("Making the probe set…"):
        qs = probes.probe_set(R.store(), ws.id or 0, int(n_multi), int(n_single), int(seed), backend)
    if not qs:
        st.warning("This workspace has too few shared entities and statements to make probes from.")
        return
    st.session_state[DRAFT] = {"ws": ws.name, "sig": ("probes", n_multi, n_single, seed),
                               "source": f"generated probes (seed {seed})", "questions": qs, "rejected": []}


def _rejected(d: dict) -> None:
    rej = d.get("rejected") or []
    if not rej:
        return
    left = sum(1 for r in rej if not r["kept"])
    with st.expander(f"{left} row(s) left out, {len(rej) - left} gold name(s) dropped", expanded=True,
                     icon=":material/warning:"):
        st.dataframe([{"line": r["line"], "": "kept, gold dropped" if r["kept"] else "left out",
                       "reason": r["reason"], "row": r["text"][:200]} for r in rej],
                     hide_index=True, width="stretch", key="ev_rejected")


def _editor(d: dict) -> list[dict]:
    """The draft as an editable table; the questions kept, with their edits."""
    qs = d["questions"]
    rows = [{"keep": True, "id": q["id"], "question": q["question"], "answer": q.get("answer") or "",
             "gold": " | ".join(g["key"] for g in q["gold"]), "generated": bool(q.get("generated"))} for q in qs]
    edited = st.container(key="ev_editor_box").data_editor(
        rows, key=f"ev_editor_{d['sig']}", hide_index=True, width="stretch", disabled=["id", "gold", "generated"],
        num_rows="fixed", column_config={
            "keep": st.column_config.CheckboxColumn(width="small"),
            "question": st.column_config.TextColumn(width="large"),
            "generated": st.column_config.CheckboxColumn(help="made from the workspace (a probe), not brought")})
    kept = []
    for q, row in zip(qs, edited):
        if row["keep"] and str(row["question"] or "").strip():
            kept.append(q | {"question": str(row["question"]).strip(), "answer": str(row["answer"] or "").strip()
                             or None})
    return kept


def draw(ws: Workspace) -> None:
    if not guard.allowed(ws, "evaluate"):
        st.info(guard.why_not(ws, "evaluate"), icon=":material/lock:")
        return
    source = offered.one(st.radio, "Questions", ["Upload a questions file", "Generate probes from this workspace"],
                      horizontal=True, key="ev_source")
    with st.container(border=True):
        (_brought if source.startswith("Upload") else _made)(ws)
    d = _draft(ws)
    if d is None:
        return
    _rejected(d)
    gen = sum(bool(q.get("generated")) for q in d["questions"])
    st.markdown(f"**{len(d['questions'])} question(s)** from {md_escape(d['source'])}"
                + (f" · {gen} generated" if gen else "") + ". Untick a question to drop it; its text and answer "
                "can be edited.")
    kept = _editor(d)
    names = strategy_names()
    with st.form("ev_run_form"):
        chosen = offered.many(st.multiselect, "Strategies (dense and BM25 are always added as baselines)", names, default=names,
                                format_func=strategy_label, key="ev_strategies")
        c = st.columns([2, 3])
        ks = offered.many(c[0].multiselect, "k", [1, 2, 3, 5, 10, 20], default=list(records.KS), key="ev_ks")
        name = c[1].text_input("Name", value=d["source"], key="ev_name")
        go = st.form_submit_button(f"Run on {len(kept)} question(s)", type="primary", icon=":material/play_arrow:",
                                   disabled=not kept)
    if not go or not guard.check(ws, "evaluate"):
        return
    try:
        ev, run = job.start_evaluation(R.store(), R.me(), ws, R.settings(), kept, chosen or None, ks or records.KS,
                                       name)
    except (JobBusy, ValueError) as exc:
        st.error(md_escape(str(exc)), icon=":material/error:")
        return
    job_panel.watch(run)
    st.session_state["ev_open"] = ev.id  # the Results tab shows it as it fills
    st.session_state[NEXT_TAB] = "Results"  # (the tabs exist already in this run: set before they are drawn)
    st.rerun()
