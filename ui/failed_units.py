"""Failed units (core/build/failures.py) as the Build page and the Quality page's job panel list them: one row per
unit whose model call still failed after its retries, with its stage, what it is and why."""

from __future__ import annotations

import streamlit as st

from core.models import FailedUnit


def table(units: list[FailedUnit], key: str) -> None:
    st.dataframe([{"stage": u.stage, "unit": u.unit, "what": u.label, "reason": u.reason, "attempts": u.attempts,
                   "run": u.run_id, "failed at": u.failed_at} for u in units],
                 hide_index=True, width="stretch", key=key)
