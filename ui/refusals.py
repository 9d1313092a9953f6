"""An upload's refusals on the Workspaces page: one warning per reason (its count and a few file names), never one
per refused file: a zip of zips may hold hundreds of thousands (core/ingest/refusals.py keeps them bounded); its
duplicates (the same content already stored) in one line; and the workspace's last uploads as recorded
(core/ingest/uploads.py), listed again on every visit."""

from __future__ import annotations

import streamlit as st

from core.ingest import Refusals
from core.ingest.uploads import Upload
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


def duplicate_line(same_as: list[tuple[str, str, str]], count: int, stored: dict[str, str], shown: int = 3) -> str:
    """Markdown, one line for an upload's duplicates (`count` in all; `same_as` the first ones as (file, title,
    stored document id)), each named with the stored document it repeats (`stored`: id -> title); escaped."""
    def one(f: str, t: str, i: str) -> str:
        name = f"**{md_escape(f or t)}**"
        return name + (f" (= “{md_escape(stored[i])}”)" if stored.get(i) and stored[i] != (f or t) else "")

    names = ", ".join(one(*d) for d in same_as[:shown]) + (", …" if count > shown else "")
    if count == 1:
        return f"{names} is already stored (the same content): not added again"
    return f"{count:,} files already stored (the same content), not added again: {names}"


def draw_duplicates(same_as: list[tuple[str, str, str]], count: int, stored: dict[str, str]) -> None:
    if count:
        st.info(duplicate_line(same_as, count, stored), icon=":material/content_copy:")


def draw_uploads(uploads: list[Upload], stored: dict[str, str]) -> None:
    """The workspace's last uploads (core/ingest/uploads.py), latest first, each with its duplicates and refusals
    in full as far as they were kept; in an expander, so nothing here repeats the fresh report's alerts."""
    if not uploads:
        return
    with st.expander(f"Last uploads ({len(uploads)}): what was added, already stored or refused"):
        for u in uploads:
            who = f" by {md_escape(u.user)}" if u.user and u.user != "local" else ""
            st.markdown(f"**{u.at:%Y-%m-%d %H:%M} UTC**{who}: {md_escape(u.summary())}")
            lines = [duplicate_line(u.duplicates, u.n_duplicates, stored, shown=20)] if u.n_duplicates else []
            lines += refusal_lines(u.refusals)
            if lines:
                st.markdown("\n".join(f"- {line}" for line in lines))
