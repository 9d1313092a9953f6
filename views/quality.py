"""Quality: community metrics per method and level, entity-merge review, and what-if re-runs of community
detection compared side by side. Each tab is drawn by its own module in ui/, only when it is the open one; the
job panel above them (ui/job_panel.py) follows a running promote, what-if run or merge decision."""

from __future__ import annotations

import streamlit as st

from ui import eval_results, guard, job_panel, merge_tab, quality_tab, whatif_tab
from ui import resources as R

ws = R.current_workspace()
st.title("Quality")
if ws is None or ws.build_version == 0:
    st.info("Nothing to measure yet: this workspace has not finished a build; watch it on the Build page.")
    st.stop()

# the job this session started (ui/job_panel.py) has ended: a what-if run, a promote or a merge decision
ended = job_panel.finished_watched(R.store(), ("whatif", "promote", "reembed"))
if ended is not None:
    (merge_tab if ended.kind == "reembed" else whatif_tab).outcome(R.store(), ws, ended)
with st.container(key="job_slot"):  # always there, empty or not: the tabs below keep their place, and so the tab
    job_panel.draw(ws)               # the user is on, when a job's panel appears or goes
    job_panel.failed(ws)             # the last job's failed units, while outstanding

eval_results.offer_rerun(ws)  # after a promote or a merge decision: the last evaluation, to re-run
# lazy tabs: only the open one runs (the Metrics tab measures and plots; the others read their own tables)
TABS = ["Metrics", "Entity resolution", "What-if"]
tabs = st.tabs(TABS, key="q_tab", on_change="rerun")
for tab, action, module in zip(tabs, (None, "merge", "whatif"), (quality_tab, merge_tab, whatif_tab)):
    if not tab.open:
        continue
    with tab:
        if action is None or guard.allowed(ws, action):  # an editor's tools: a viewer is told why they are not there
            module.draw(ws)
        else:
            st.info(guard.why_not(ws, action), icon=":material/lock:")
