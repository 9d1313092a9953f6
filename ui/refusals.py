"""An upload's refusals on the Workspaces page: one warning per reason (its count and a few file names), never one
per refused file: a zip of zips may hold hundreds of thousands (core/ingest/refusals.py keeps them bounded)."""

from __future__ import annotations

import streamlit as st

from core.ingest import Refusals
from ui.text import md_escape


def _names(names: list[str], more: bool) -> str:
    return ", ".join(f"**{md_escape(n)}**" for n in names) + (", …" if more else "")


def refusal_lines(refusals: Refusals) -> list[str]:
    """Markdown, one line per group of `refusals`; file names and reasons escaped (they come from the upload)."""
    out = []
    for g in refusals.groups:
        more = g.count > len(g.examples)
        if g.reason is None:
            shown = "; ".join(f"**{md_escape(r.filename)}**: {md_escape(r.reason)}" for r in g.examples)
            out.append(f"{g.count:,} more refused for other reasons" + (f", e.g. {shown}" if shown else "")
                       + ("; …" if more and shown else ""))
        elif g.count == 1 and g.examples:
            out.append(f"**{md_escape(g.examples[0].filename)}** refused: {md_escape(g.reason)}")
        else:
            out.append(f"{g.count:,} files refused: {md_escape(g.reason)}, e.g. {_names([r.filename for r in g.examples], more)}")
    return out


def draw_refusals(refusals: Refusals) -> None:
    for line in refusal_lines(refusals):
        st.warning(line, icon=":material/block:")
