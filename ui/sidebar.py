"""The sidebar every page shares: the workspace picker, the current workspace's build status (live), and which
language backend is active."""

from __future__ import annotations

import streamlit as st

from core.index import vectors
from core.pipeline import runs
from core.pipeline.failures import count_failed, plural
from core.pipeline.runs import active_run
from ui import guard, offered
from ui import resources as R
from ui.text import md_escape

STATUS_EVERY_S = 2.0  # while a run of the workspace is active
# while none is: a build started elsewhere (another tab, the CLI) shows within this. Longer, because each tick is a
# fragment run queued behind whatever the page is running, and one that starts just as a long run ends can keep that
# run's replaced elements on screen (Streamlit's browser side clears them in the wrong scope: streamlit#16708)
IDLE_EVERY_S = 10.0
PICKER = "workspace_picker"  # the picker widget's own key; the current workspace lives in R.WS_KEY
_DRAWN = "_status_drawn"  # session state: the (run id, build version) the page was last drawn with


def _state(ws):
    """(the workspace's active run or None, the key that changes when a build starts or ends)."""
    run = active_run(R.store(), ws)
    return run, ((run.id if run is not None else None), ws.build_version)


def _status(ws_name: str) -> None:
    """The workspace's build status, redrawn every couple of seconds while a run is active (every ten when none
    is), whoever started the build (this tab, another one, the CLI). When a build starts or ends, the whole page is
    drawn again once, so what it shows (a table's status column, a page waiting for a first build) follows without a
    click."""
    ws = R.store().get_workspace(ws_name)
    if ws is None:
        return
    run, now = _state(ws)
    if st.session_state.get(_DRAWN) not in (None, now):
        st.session_state[_DRAWN] = now
        st.rerun()
    if run is not None:
        what = f"Building build {ws.build_version + 1}" if (run.kind or "build") == "build" else runs.run_label(run)
        st.info(md_escape(f"{what}… {run.stage or 'queued'}"), icon=":material/construction:")
    elif ws.build_version:
        n_failed = count_failed(R.store(), ws.id or 0)  # (core/pipeline/failures.py: a run "done" may leave some)
        st.caption(f"Built with the **{ws.backend}** backend ({ws.chat_model or 'heuristic'}), "
                   f"embedder **{ws.embedder}** · build {ws.build_version}"
                   + (f" · **{plural(n_failed)}** (see the Build page)" if n_failed else ""))
    else:
        st.caption("Not built yet.")


def _reopen_vectors(ws) -> None:
    """After a build or job of the workspace finished in the background worker, this process's chromadb handles
    no longer see what it wrote: the next ones open afresh (core/worker.py, `finished_since_seen`)."""
    if runs.finished_since_seen(R.store(), ws.id):
        vectors.reopen_vector_stores()
        R.clear_vector_indexes()


def _backend() -> None:
    b = R.settings().backend
    if b.kind in ("ollama", "openai"):
        statuses = R.server_status(b.kind, tuple(b.endpoints()), b.chat_model, b.embed_model,
                                   R.settings().embed.embedder == b.kind)
        bad = [s for s in statuses if not s["reachable"] or s["missing"]]
        if not bad:
            label = "Ollama" if b.kind == "ollama" else "OpenAI-compatible server"
            where = ", ".join(s["host"] for s in statuses)
            st.success(f"Backend: {label} at {where} ({b.chat_model})", icon=":material/bolt:")
        for s in bad:
            st.warning(md_escape(s["message"]), icon=":material/warning:")  # a server's own words in it
    else:
        how = {"spacy": "spaCy extraction"}.get(R.settings().extract.offline_extractor, "heuristic extraction")
        st.success(f"Backend: offline ({how}, extractive answers)", icon=":material/offline_bolt:")


def sidebar() -> None:
    with st.sidebar:
        st.markdown("### Strata")
        names = [w.name for w in R.visible_workspaces()]
        ws = R.current_workspace()
        if names and ws is not None:
            st.session_state[PICKER] = ws.name  # (set before the widget is drawn: it shows the current one)
            offered.one(st.selectbox, "Workspace", names, key=PICKER,
                         on_change=lambda: R.select_workspace(st.session_state.get(PICKER)))
            if R.settings().auth.mode != "none":
                st.caption(f"Your role: **{guard.role(ws) or 'none'}**")
        if ws is not None:
            _reopen_vectors(ws)
            run, st.session_state[_DRAWN] = _state(ws)
            st.fragment(run_every=STATUS_EVERY_S if run is not None else IDLE_EVERY_S)(_status)(ws.name)
        _backend()
