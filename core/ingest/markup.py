"""Markup rendered to the text a reader sees: HTML pages and Markdown files, before chunking.

HTML (`html_to_text`): scripts, styles, navigation and comments dropped, entities decoded, each block element a
paragraph of its own, `<br>` a line break, the `<title>` (else the first `<h1>`) as the title.

Markdown (`markdown_to_text`), parsed as CommonMark by markdown-it-py (with GFM tables and strikethrough): inline
HTML tags dropped and HTML blocks read as HTML above, entities decoded, emphasis, code and link markers gone (a
link's text kept, its URL dropped; an image's alt text kept), block-quote and list markers gone, each paragraph, list
item, quoted paragraph, table row (cells joined by " | ", as DOCX tables are) and code block a paragraph of its own,
soft line breaks read as spaces. A heading stays one line marked as a heading, `#` per level and a space ("## Origins"
for a setext or ATX heading alike): the extractors and the offline answers tell headings from sentences by that mark
(core/extract, core/backends/offline.py). The title is the first level-1 heading's text.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

# ------------------------------------------------------------------------------------------------------------ HTML
_DROP_TAGS = ("script", "style", "nav", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "head")
_BLOCK_TAGS = (
    "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "section",
    "article", "blockquote", "pre", "header", "footer", "main", "aside", "figure", "figcaption", "address", "hr",
    "form", "fieldset", "details", "summary", "caption",
)  # fmt: skip
_PARA, _LINE = "\ue000", "\ue001"


def html_to_text(markup: str | bytes) -> tuple[str, str]:
    """(title, text) of an HTML page or fragment (module doc); bytes are decoded by their declared charset. The text
    is not yet cleaned of control characters (`formats.clean_text`)."""
    from bs4 import BeautifulSoup, Comment

    if isinstance(markup, str):
        markup = markup.replace(_PARA, "").replace(_LINE, "")
    try:
        soup = BeautifulSoup(markup, "lxml")
    except Exception:  # noqa: BLE001 - lxml missing or choking: fall back to the stdlib parser
        soup = BeautifulSoup(markup, "html.parser")
    title = ""
    if soup.title is not None:
        title = " ".join(soup.title.get_text(" ").split())
    if not title:
        h1 = soup.find("h1")
        title = " ".join(h1.get_text(" ").split()) if h1 is not None else ""
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    for el in soup.find_all(_DROP_TAGS):
        el.decompose()
    for br in soup.find_all("br"):
        br.replace_with(_LINE)
    for el in soup.find_all(_BLOCK_TAGS):
        el.insert_before(_PARA)
        el.append(_PARA)
    raw = soup.get_text()
    raw = raw.replace(_PARA, "\n" + _PARA + "\n").replace(_LINE, "\n" + _LINE + "\n")
    lines: list[str] = []
    pending = ""
    for piece in raw.split("\n"):
        if piece == _PARA:
            pending = "\n\n"
        elif piece == _LINE:
            pending = pending or "\n"
        else:
            words = " ".join(piece.split())
            if words:
                if lines:
                    lines.append(pending or " ")
                lines.append(words)
                pending = ""
    return title, "".join(lines)


# -------------------------------------------------------------------------------------------------------- Markdown
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_BR = re.compile(r"<br\s*/?\s*>", re.IGNORECASE)
_CELL = ("th_open", "td_open")


def markdown_to_text(source: str) -> tuple[str, str]:
    """(title, text) of a Markdown document (module doc): the first level-1 heading ("" when none) and the text."""
    tokens = _MARKDOWN.parse(source)
    blocks: list[str] = []
    row: list[str] | None = None
    title = ""
    for i, tok in enumerate(tokens):
        kind = tok.type
        if kind == "inline":
            opener = tokens[i - 1]
            text = _inline(tok.children or [])
            if opener.type == "heading_open":
                line = " ".join(text.split())
                if line:
                    level = int(opener.tag[1:])
                    title = title or (line if level == 1 else "")
                    blocks.append("#" * level + " " + line)
            elif opener.type in _CELL and row is not None:
                row.append(" ".join(text.split()))
            elif text:
                blocks.append(text)
        elif kind in ("fence", "code_block"):
            code = "\n".join(line.rstrip() for line in tok.content.strip("\n").split("\n"))
            if code.strip():
                blocks.append(code)
        elif kind == "html_block":
            text = html_to_text(tok.content)[1]
            if text:
                blocks.append(text)
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close" and row is not None:
            if any(row):
                blocks.append(" | ".join(c for c in row if c))
            row = None
    return title, "\n\n".join(blocks)


def _inline(children) -> str:
    """An inline run as read: text and code spans as they are, entities decoded (by the parser), HTML tags and
    emphasis / link markers dropped, an image's alt text kept; soft breaks are spaces, hard breaks (and `<br>`)
    line breaks; spaces collapsed within each line."""
    out: list[str] = []
    for t in children:
        if t.type in ("text", "code_inline"):
            out.append(t.content)
        elif t.type == "softbreak":
            out.append(" ")
        elif t.type == "hardbreak" or (t.type == "html_inline" and _BR.fullmatch(t.content.strip())):
            out.append("\n")
        elif t.type == "image":
            out.append(_inline(t.children or []))
    lines = (" ".join(line.split()) for line in "".join(out).split("\n"))
    return "\n".join(line for line in lines if line)
