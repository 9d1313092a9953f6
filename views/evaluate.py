"""Evaluate: which strategy retrieves best on this workspace's own documents, and did the last change (a merge
decision, a what-if promote, a rebuild) make it better or worse. New evaluation (questions brought or made,
ui/eval_setup.py), Results (figures with intervals, the winner of each figure and whether its lead is significant,
per question, the best strategies' paths with the gold highlighted, ui/eval_results.py) and Compare (two runs of one
question set, from two builds or two workspaces, ui/eval_compare.py); the job panel above them
follows a running evaluation (ui/job_panel.py). The engine is core/evaluation."""

from __future__ import annotations

import streamlit as st

from core.pipeline.runs import run_label
from ui import eval_compare, eval_results, eval_setup, job_panel
from ui import resources as R
from ui.text import md_escape

ws = R.current_workspace()
st.title("Evaluate")
if ws is None or ws.build_version == 0:
    st.info("Nothing to evaluate yet: this workspace has not finished a build; watch it on the Build page.")
    st.stop()

ended = job_panel.finished_watched(R.store(), ("evaluate",))
if ended is not None:
    said = {"done": "measured", "cancelled": "stopped: resume it from Results"}.get(ended.status, ended.status)
    st.toast(f"{md_escape(run_label(ended))} {said}.")
with st.container(key="job_slot"):
    job_panel.draw(ws)

latest = eval_results.offer_rerun(ws, link=False)  # (the newest evaluation: the tabs open on Results when one is)

# lazy tabs (only the open one runs: the question view draws a path per strategy); a run started switches to
# Results (eval_setup sets NEXT_TAB), a first visit with no evaluation opens New evaluation
names = ["Results", "New evaluation", "Compare"]
if (nxt := st.session_state.pop(eval_setup.NEXT_TAB, None)) in names:
    st.session_state[eval_setup.TAB] = nxt
tabs = st.tabs(names, key=eval_setup.TAB, on_change="rerun", default="Results" if latest is not None else names[1])
for tab, module in zip(tabs, (eval_results, eval_setup, eval_compare)):
    if tab.open:
        with tab:
            module.draw(ws)
