"""Text from documents on its way into Streamlit Markdown (bodies, captions, alerts and widget labels)."""

from __future__ import annotations

import re

from core.extract.text import truncate

# Every Markdown, HTML and LaTeX ($…$) markup character Streamlit would interpret.
_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text: str) -> str:
    """Document text shown as Markdown: every markup character escaped."""
    return _MD.sub(r"\\\1", text)


def md_label(text: str, n: int) -> str:
    """A document-derived title for a Markdown label: shortened at a word boundary, then escaped."""
    return md_escape(truncate(text, n))
