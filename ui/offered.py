"""Choices from the browser, kept to what the page offered.

A widget's value comes from the browser, and the browser can send anything: Streamlit hands a selectbox (radio,
multiselect, select slider) a value that is not among its options when a hand-made websocket message says so, and
its callbacks read that value from session state. So every such widget of the app is drawn through `one` or `many`:

* the value returned is one of the options (a multiselect's, only those among the options) or None (nothing chosen,
  as the page itself may set it), else the widget's default: a foreign id, a workspace name never offered or a
  garbage string is ignored without an error;
* every such widget has a key, and a callback that first puts its session state back among the options, then runs
  the page's own callback, so neither a callback that reads `st.session_state[key]` nor the next run sees a value
  the page did not offer.

Nothing here is a security boundary on its own: core reads every row by id within the current workspace
(core/ids.py `owned`), so even a value that got through could not open another workspace's text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import streamlit as st
from streamlit.elements.lib.form_utils import current_form_id

T = TypeVar("T")


def _in(value: Any, options: Sequence[Any]) -> bool:
    try:
        return any(value == o and type(value) is type(o) for o in options)
    except Exception:  # noqa: BLE001 - a value that cannot be compared is not an option
        return False


def _guarded(widget, key: str, fix: Callable[[Any], Any], on_change, args, kwargs):
    """The page's callback, preceded by putting the widget's session state back among the options. Inside a form
    no widget may have a callback (Streamlit's rule): there only the value returned is kept to the options, and a
    submit callback that reads the session state must not trust it (the share form's role is checked by
    core.access.share, which refuses a role it does not know)."""
    owner = getattr(widget, "__self__", None)  # st.radio and a column's .radio are DeltaGenerator methods
    if owner is not None and current_form_id(owner):
        return on_change

    def callback() -> None:
        if key in st.session_state:
            st.session_state[key] = fix(st.session_state[key])
        if on_change is not None:
            on_change(*(args or ()), **(kwargs or {}))

    return callback


def one(widget: Callable[..., Any], label: str, options: Sequence[T], *, key: str,
        on_change: Callable[..., Any] | None = None, args: tuple | None = None, kwargs: dict | None = None,
        **kw: Any) -> T:
    """`widget` (st.selectbox, st.radio, st.select_slider, or a column's) over `options`, with a default option;
    its value, or that default when the browser sent one that was never offered."""
    if kw.get("index", 0) is None:
        raise ValueError("a widget with no default option is drawn with `maybe`")
    return cast(T, _one(widget, label, options, key, on_change, args, kwargs, kw))


def maybe(widget: Callable[..., Any], label: str, options: Sequence[T], *, key: str,
          on_change: Callable[..., Any] | None = None, args: tuple | None = None, kwargs: dict | None = None,
          **kw: Any) -> T | None:
    """`one` for a widget with nothing chosen at first (index=None): None when the browser sent no option."""
    return _one(widget, label, options, key, on_change, args, kwargs, dict(kw, index=None))


def _one(widget, label, options, key, on_change, args, kwargs, kw) -> Any:
    options = list(options)
    index = kw.get("index", 0)
    default = kw.get("value") if "value" in kw else (options[index] if index is not None and options else None)

    def fix(value: Any) -> Any:  # None: nothing chosen (the page set it so; a browser's empty value is the default)
        return value if value is None or _in(value, options) else default

    value = widget(label, options, key=key, on_change=_guarded(widget, key, fix, on_change, args, kwargs),
                   **kw)
    return fix(value)


def many(widget: Callable[..., Any], label: str, options: Sequence[T], *, key: str,
         on_change: Callable[..., Any] | None = None, args: tuple | None = None, kwargs: dict | None = None,
         **kw: Any) -> list[T]:
    """`widget` (st.multiselect, or a column's) over `options`; the chosen values that are options, in order."""
    options = list(options)
    cap = kw.get("max_selections")

    def fix(value: Any) -> list:
        chosen = [v for v in (value if isinstance(value, (list, tuple)) else []) if _in(v, options)]
        return list(dict.fromkeys(chosen))[:cap] if cap else list(dict.fromkeys(chosen))

    value = widget(label, options, key=key, on_change=_guarded(widget, key, fix, on_change, args, kwargs),
                   **kw)
    return fix(value)
