"""A prompt that fits a server's context window: what the server says its window is, and the prompt cut to it.

A server states its window in different places: llama-cpp-python's and vLLM's refusal of a too-long request says
"This model's maximum context length is N tokens. However, you requested M tokens (P in the messages, C in the
completion)"; llama.cpp's own `llama-server` answers `exceed_context_size_error` with `n_ctx` and `n_prompt_tokens`
in the error body, and tells its window at GET /props (`default_generation_settings.n_ctx`). `window_from_error`
reads the first two; `window_from_props` the last.

`cut_prompt` shortens a prompt to a number of characters: the longest block of untrusted material between the
`<<<BEGIN …>>>` / `<<<END …>>>` markers of core/extract/prompts.py loses its end first (the instructions before and
after it, and the markers, stay whole), then the next longest; a prompt without such blocks loses its middle. The
characters a token holds are measured from the server's own count when it gave one (P tokens for this many
characters), else taken as `CHARS_PER_TOKEN`, a low guess for English text (fewer characters per token cut more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 3.0  # a low guess of the characters per token of English prose, until the server has counted
MARGIN_TOKENS = 32  # room for the chat template's own tokens around the messages
CUT_MARK = "\n[…cut to fit the model's context…]"

_MAX_CTX = re.compile(r"maximum context length is (\d+) tokens", re.I)
_REQUESTED = re.compile(r"\((\d+) in the messages", re.I)
_RESULTED = re.compile(r"(?:messages resulted in|you requested) (\d+) tokens", re.I)
_EXCEEDS = re.compile(r"exceed(?:s|ed)? (?:the )?(?:available )?context (?:size|window|length)|context[_ ]length", re.I)
_WINDOW_OF = re.compile(r"context (?:window|size) of (\d+)", re.I)
_FENCED = re.compile(r"(<<<BEGIN ([^>\n]+)>>>\n)(.*?)(\n<<<END \2>>>)", re.S)


@dataclass
class Window:
    """What a refusal said: the window in tokens (None when it did not say) and the prompt's tokens (None too)."""

    n_ctx: int | None
    prompt_tokens: int | None = None


def window_from_error(status: int, message: str, body: Any = None) -> Window | None:
    """The window a refusal names, when it is a refusal for a too-long request (HTTP 400/413/422, or 500 from a
    server that reports every error so); None for any other error."""
    text = message or ""
    err = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(err, dict) and (err.get("type") == "exceed_context_size_error" or err.get("n_ctx")):
        n_ctx, used = err.get("n_ctx"), err.get("n_prompt_tokens")
        return Window(int(n_ctx) if isinstance(n_ctx, int) else None, int(used) if isinstance(used, int) else None)
    if status not in (400, 413, 422, 500) or not (_MAX_CTX.search(text) or _EXCEEDS.search(text)
                                                  or _WINDOW_OF.search(text)):
        return None
    found = _MAX_CTX.search(text) or _WINDOW_OF.search(text)
    used = _REQUESTED.search(text) or _RESULTED.search(text)
    return Window(int(found.group(1)) if found else None, int(used.group(1)) if used else None)


def window_from_props(props: Any) -> int | None:
    """`n_ctx` from llama-server's GET /props reply (top level or in `default_generation_settings`)."""
    if not isinstance(props, dict):
        return None
    for holder in (props.get("default_generation_settings"), props):
        if isinstance(holder, dict) and isinstance(holder.get("n_ctx"), int) and holder["n_ctx"] > 0:
            return int(holder["n_ctx"])
    return None


def reply_budget(max_tokens: int, n_ctx: int | None) -> int:
    """The tokens a reply may take: `max_tokens`, and at most half the window when the window is known."""
    return max(16, min(int(max_tokens), n_ctx // 2)) if n_ctx else max(16, int(max_tokens))


def prompt_chars(n_ctx: int, max_tokens: int, chars_per_token: float) -> int:
    """The characters a prompt may have in a window of `n_ctx` tokens that leaves `max_tokens` for the reply."""
    return max(200, int((n_ctx - reply_budget(max_tokens, n_ctx) - MARGIN_TOKENS) * chars_per_token * 0.95))


def cut_prompt(prompt: str, limit: int) -> str:
    """`prompt` at most `limit` characters long (module docstring); unchanged when it already is."""
    if len(prompt) <= limit:
        return prompt
    text = prompt
    while len(text) > limit:
        blocks = sorted(_FENCED.finditer(text), key=lambda m: len(m.group(3)), reverse=True)
        block = blocks[0] if blocks else None
        if block is None or len(block.group(3)) <= len(CUT_MARK) + 20:
            break
        keep = max(0, len(block.group(3)) - (len(text) - limit) - len(CUT_MARK))
        body = block.group(3)[:keep].rstrip() + CUT_MARK
        text = text[:block.start(3)] + body + text[block.end(3):]
    if len(text) > limit:  # no material left to cut: the middle goes
        head = max(0, limit // 3)
        tail = max(0, limit - head - len(CUT_MARK))
        text = text[:head] + CUT_MARK + (text[-tail:] if tail else "")
    return text
