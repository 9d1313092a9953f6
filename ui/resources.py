"""Cached handles for the app: settings, store, embedder, per-build query resources, backend status."""

from __future__ import annotations

import logging
import threading

import streamlit as st

from core.access import User
from core.backends.servers import embedder_kind
from core.config import Settings
from core.index.vectors import VectorIndex
from core.models import Workspace
from core.protocols import Embedder
from core.retrieval.base import Resources
from core.store import Store

WS_KEY = "workspace"  # session state: the current workspace's name (plain state, not a widget's: Streamlit drops
# a widget's state on st.switch_page, streamlit#11115, so the sidebar's picker only writes here)


@st.cache_resource(show_spinner=False)
def settings() -> Settings:
    return Settings.from_env()


@st.cache_resource(show_spinner=False)
def store() -> Store:
    return Store(settings().storage.db_url)


@st.cache_resource(show_spinner="Loading the embedding model…")
def embedder(kind: str, runtime: str = "") -> Embedder:
    """The embedder of `kind` ("minilm", a served model's name); MiniLM on `runtime` (a workspace's recorded one,
    core/index/writer.py) when given and loadable here, else on this host's own. One loads at a time in the process
    (`_LOADING`): two threads importing torch at once can each see it half initialised."""
    from core.pipeline.factory import embedder_on

    s = settings().model_copy(deep=True)
    s.embed.embedder = embedder_kind(kind)  # type: ignore[assignment]
    with _LOADING:
        emb = embedder_on(s, runtime)
        if s.embed.embedder == "minilm":
            emb.embed(["warm"])  # MiniLM loads its runtime on its first text: here, under the lock
    return emb


_LOADING = threading.Lock()


def workspace_embedder(ws: Workspace) -> Embedder:
    """The embedder a workspace's questions are embedded with (its vectors' recorded runtime, see `embedder`)."""
    rec = vector_index(ws.name, ws.embedder or "minilm").recorded() if embedder_kind(ws.embedder) == "minilm" else None
    return embedder(ws.embedder, rec.runtime if rec is not None else "")


def ws_key(ws: Workspace) -> str:
    """What the page caches key a workspace's views by: its id and creation time (a workspace deleted and created
    again under the same name, or given a freed id, never meets the old one's cached texts, reports or answers) and
    its build version (a new build reloads)."""
    return f"{_identity(ws)}#{ws.build_version}"


def _identity(ws: Workspace) -> str:
    """A workspace as distinct from one deleted before it under the same name (or id)."""
    return f"{ws.id}@{ws.created_at.isoformat()}"


def vector_index(ws_name: str, embedder_name: str) -> VectorIndex:
    """The workspace's chromadb collections for one embedder: one handle per workspace (and creation), per process,
    shared by every page."""
    ws = store().require_workspace(ws_name)
    return _vector_index(ws_name, embedder_name, _identity(ws))


def clear_vector_indexes() -> None:
    """Drop every cached vector index handle (the next `vector_index` opens afresh)."""
    _vector_index.clear()


@st.cache_resource(show_spinner=False, max_entries=8)
def _vector_index(ws_name: str, embedder_name: str, identity: str) -> VectorIndex:
    from core.pipeline.factory import open_index

    return open_index(settings(), ws_name, embedder_name)


@st.cache_resource(show_spinner="Loading the graph…", max_entries=4)
def resources(ws_name: str, version: str) -> Resources:
    """Query resources for one build of a workspace, shared by every session; a new build version loads afresh.
    What strategies derive from it (walks, lexicons, the C-HNSW) is built once, under a lock, in its cache
    (core/retrieval/cache.py), so sessions asking at once wait for one build instead of each making its own."""
    from core.workspace import open_resources

    ws = store().require_workspace(ws_name)
    res = open_resources(store(), ws, settings(), workspace_embedder(ws))
    _ = res.view  # load the graph view once, here, not on the first question
    return res


def warm_up(ws: Workspace, strategies: list[str]) -> None:
    """Once per build of a workspace per process, once the Ask page is drawn: load what its first question needs
    (the embedder, the graph view, each of `strategies`' structures: core/workspace.py `warm`) in a background thread,
    into the same caches the Ask page reads. Without it the first question after the server starts took 3.6-4.8 s,
    the next ones 0.5 s. A question asked meanwhile waits on the same locks (`resources`, `embedder`, the build
    cache) instead of loading a second copy; a failure here is only logged (the question then meets it and says it).
    Only the Ask page starts it, and only for its default strategy: warming after every page slowed the pages opened
    in the next 4 s by about 0.5 s (one Python process: the threads share one interpreter lock)."""
    if settings().retrieval.warm_up and ws.build_version > 0:
        _warming(ws.name, ws_key(ws), tuple(strategies))


@st.cache_resource(show_spinner=False, max_entries=8)
def _warming(ws_name: str, key: str, strategies: tuple[str, ...]) -> threading.Thread:
    """The warm-up thread of one build (started once: kept, and forgotten, with the caches it fills)."""
    t = threading.Thread(target=_warm, args=(ws_name, key, list(strategies)), name=f"strata-warm-{key}", daemon=True)
    t.start()
    return t


class _NoContextWarning(logging.Filter):
    """The warm-up thread is no script run: Streamlit's "missing ScriptRunContext" line from it says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName or "").startswith("strata-warm-")


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NoContextWarning())


def _warm(ws_name: str, key: str, strategies: list[str]) -> None:
    from core.workspace import warm

    try:
        warm(resources(ws_name, key), strategies)
    except Exception:  # noqa: BLE001 - the question asked later reports it in its own words
        logging.getLogger(__name__).warning("warming %s's query resources failed", ws_name, exc_info=True)


@st.cache_data(ttl=20, show_spinner=False)
def server_status(kind: str, hosts: tuple[str, ...], chat_model: str, embed_model: str, need_embed: bool) -> list[dict]:
    """Every host of the model server `kind` ("ollama", "openai"): reachable, its models, what it lacks, a message."""
    from core.backends.servers import check
    from core.secrets import redact_text, redact_url  # what the sidebar shows holds no password, key or token

    cfg = settings().backend.model_copy(update={"kind": kind, "hosts": list(hosts), "chat_model": chat_model,
                                                "embed_model": embed_model, "timeout_s": 3.0})
    return [{"reachable": s.reachable, "host": redact_url(s.host), "models": s.models, "missing": s.missing,
             "message": redact_text(s.message)} for s in check(cfg, kind, need_embed=need_embed)]


@st.cache_data(ttl=20, show_spinner=False)
def vector_store_problem(url: str | None) -> str | None:
    """None when the vector store answers (always, embedded), else the one-line reason the Chroma server at `url`
    (STRATA_CHROMA_URL) does not."""
    if not url:
        return None
    from core.index.chroma import server_available

    return server_available(url)


@st.cache_resource(show_spinner="Preparing the sample workspace…")
def bootstrap() -> str:
    """On first start: create and build the `sample` workspace (in the background), unless
    `storage.sample_on_start` is off (STRATA_SAMPLE=0). Returns its name, or "" when there is none."""
    from core.workspace import ensure_sample

    ws, _ = ensure_sample(store(), settings())
    return ws.name if ws is not None else ""


def me() -> User:
    """The visitor, signed in (app.py's gate stops every page before this for anyone else)."""
    from ui.auth import user

    u = user()
    if u is None:
        st.stop()
    return u


def select_workspace(name: str | None) -> None:
    """Make `name` the current workspace (None: the default one); the sidebar's picker follows on the next run."""
    if name:
        st.session_state[WS_KEY] = name
    else:
        st.session_state.pop(WS_KEY, None)


def visible_workspaces() -> list[Workspace]:
    """The workspaces the visitor may see (core/access.py), by name."""
    from core.access import visible

    return visible(store(), me())


def current_workspace() -> Workspace | None:
    """The current workspace: the one chosen, if the visitor may see it, else the sample or the first they may."""
    mine = visible_workspaces()
    name = st.session_state.get(WS_KEY)
    ws = next((w for w in mine if w.name == name), None)
    if ws is None:
        ws = next((w for w in mine if w.name == "sample"), mine[0] if mine else None)
        if ws is not None:
            st.session_state[WS_KEY] = ws.name
        else:
            st.session_state.pop(WS_KEY, None)
    return ws
