"""Quality: community metrics per method and level, entity-merge review, and what-if re-runs of community
detection compared side by side. Each tab is drawn by its own module in ui/."""

from __future__ import annotations

import streamlit as st

from ui import merge_tab, quality_tab, whatif_tab
from ui import resources as R

ws = R.current_workspace()
st.title("Quality")
if ws is None or ws.build_version == 0:
    st.info("Nothing to measure yet: this workspace has not finished a build; watch it on the Build page.")
    st.stop()

tabs = st.tabs(["Metrics", "Entity resolution", "What-if"])
with tabs[0]:
    quality_tab.draw(ws)
with tabs[1]:
    merge_tab.draw(ws)
with tabs[2]:
    whatif_tab.draw(ws)
