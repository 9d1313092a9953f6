"""Text from documents on its way into Streamlit Markdown (bodies, captions, alerts and widget labels)."""

from __future__ import annotations

import re

from core.text import truncate

# Every Markdown, HTML and LaTeX ($…$) markup character Streamlit would interpret.
_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text: str) -> str:
    """Document text shown as Markdown: every markup character escaped."""
    return _MD.sub(r"\\\1", text)


def md_label(text: str, n: int) -> str:
    """A document-derived title for a Markdown label: shortened at a word boundary, then escaped."""
    return md_escape(truncate(text, n))


_LEVEL = re.compile(r"^(Local|Bridge|Global)\b")


def md_answer(text: str) -> str:
    """An answer as Markdown: its text escaped, its lines kept, and the level that opens a line (the offline
    backend's answers give one line per level) in bold."""
    return "  \n".join(_LEVEL.sub(r"**\1**", md_escape(line)) for line in text.splitlines())


def md_name(text: str) -> str:
    """A person's name (an email from a sign-in, a proxy's header) as Markdown: a code span, which Markdown neither
    interprets nor turns into a mailto link (its backticks become quotes)."""
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"
