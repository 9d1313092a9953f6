"""Expanders whose contents are drawn only once opened: a page of a few hundred closed items (the Ask page's context
panels and sources, the Quality page's reports) reaches the browser several times faster, since the browser's work
grows with every element sent, shown or not. Opening one reruns the page, or the fragment it sits in."""

from __future__ import annotations

import streamlit as st

LAZY = "open_"  # the keys of the expanders drawn only when opened


def lazy_expander(label: str, key: str):
    """An expander whose contents the caller draws only when it is open (`.open`; opening it reruns the page or
    fragment): a page of hundreds of closed items reaches the browser several times faster. Its state is
    `LAZY + key` in the session, dropped by `close_lazy` when new results replace the old."""
    return st.expander(label, key=LAZY + key, on_change="rerun")


def close_lazy() -> None:
    """Close every lazy expander: the results they belonged to were replaced (the same key may hold another item)."""
    for k in [k for k in st.session_state if str(k).startswith(LAZY)]:
        del st.session_state[k]
