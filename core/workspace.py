"""Workspace-level operations shared by the CLI and the app: ingest files, open query resources, ask, and
create the bundled sample workspace on first start."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from core import access
from core.answer import Answer, answer, context_budget
from core.config import Settings
from core.ingest import LoadedDoc, Refusals, count_tokens, load_path
from core.ingest.add import add_documents
from core.ingest.isolate import load_uploads
from core.models import BuildRun, QueryLog, Workspace
from core.pipeline.factory import delete_vectors, open_index
from core.pipeline.runner import create_run
from core.pipeline.runs import active_run, check_idle, launch_worker
from core.protocols import Embedder, LanguageBackend, RetrievalLLM
from core.retrieval.base import Resources, Retrieval, get_strategy
from core.store import Store

SAMPLE_NAME = "sample"
SAMPLE_DIR = Path(__file__).resolve().parent.parent / "data" / "sample"


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)  # titles
    duplicates: list[str] = field(default_factory=list)
    refusals: Refusals = field(default_factory=Refusals)  # counted and grouped by reason: bounded
    same_as: list[tuple[str, str, str]] = field(default_factory=list)  # per duplicate: (file, title, stored id)

    def summary(self) -> str:
        parts = [f"{len(self.added)} document(s) added"]
        if self.duplicates:
            parts.append(f"{len(self.duplicates)} already present")
        if self.refusals:
            parts.append(f"{self.refusals.total:,} refused")
        return ", ".join(parts)


def _store_loaded(store: Store, ws: Workspace, docs: list[LoadedDoc], refusals: Refusals) -> IngestReport:
    res = add_documents(store, ws, docs)
    return IngestReport([d.title for d in res.added], res.duplicates, refusals, res.same_as)


def ingest_uploads(store: Store, ws: Workspace, files: list[tuple[str, bytes]], settings: Settings) -> IngestReport:
    """Uploaded (name, bytes) pairs: each accepted or refused on its own; nothing stored is touched on refusal."""
    docs: list[LoadedDoc] = []
    refusals = Refusals()
    for d, r in load_uploads(files, settings.ingest):  # in a child process, within the upload's limits
        docs += d
        refusals.merge(r)
    return _store_loaded(store, ws, docs, refusals)


def ingest_paths(store: Store, ws: Workspace, paths: list[Path], settings: Settings) -> IngestReport:
    docs: list[LoadedDoc] = []
    refusals = Refusals()
    for p in paths:
        if not Path(p).exists():
            refusals.add(str(p), "no such file or folder")
            continue
        d, r = load_path(Path(p), settings.ingest)
        docs += d
        refusals.merge(r)
    return _store_loaded(store, ws, docs, refusals)


def open_resources(store: Store, ws: Workspace, settings: Settings, embedder: Embedder) -> Resources:
    return Resources(store=store, ws=ws, settings=settings, embedder=embedder,
                     index=open_index(settings, ws.name, embedder.name))


WARM_QUESTION = "What is this document set about?"


def warm(res: Resources, strategies: list[str]) -> None:
    """Load what a first question with each of `strategies` loads (the embedder, the graph view, each strategy's
    derived structures: core/retrieval/cache.py) by retrieving once with each, offline, logged nowhere, the
    results dropped: the app does it in the background once the Ask page is drawn (ui/resources.py `warm_up`)."""
    for name in strategies:
        get_strategy(name).retrieve(res, WARM_QUESTION, llm=None)


def retrieval_llm(backend: LanguageBackend) -> RetrievalLLM | None:
    """The model that runs the strategies' language steps (a model backend: GraphRAG's map, ArchRAG's filter,
    HLG's keywords and rerank, NodeRAG's question entities), or None offline: `ask` and `eval` both use it."""
    return backend if isinstance(backend, RetrievalLLM) else None


def ask(res: Resources, backend: LanguageBackend, question: str, strategy: str,
        log: bool = True, asked_by: access.User | None = None) -> tuple[Retrieval, Answer]:
    """Retrieve with `strategy`, answer from the result, and record both in the workspace's query log (with who
    asked: `asked_by`'s name when a person signed in; none for the local user of a laptop without sign-in). With a
    model backend (Ollama) the strategies' language steps use it too (GraphRAG's map, ArchRAG's filter, HLG's
    keywords and rerank, NodeRAG's question entities); offline they run their extractive versions."""
    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    cap = res.settings.retrieval.max_question_chars
    if len(question) > cap:
        raise ValueError(f"the question is too long: {len(question):,} > {cap:,} characters "
                         f"(retrieval.max_question_chars; raise STRATA_MAX_QUESTION_CHARS)")
    t0 = time.perf_counter()
    llm = retrieval_llm(backend)
    r = get_strategy(strategy).retrieve(res, question, llm=llm)
    retrieval_ms = (time.perf_counter() - t0) * 1000
    t1 = time.perf_counter()
    # a model's context window bounds the context it is given; the offline answer reads all of it
    a = answer(backend, r, context_budget(res.settings.backend.num_ctx) if llm is not None else None, res)
    r.trace["timings_ms"]["answer"] = round((time.perf_counter() - t1) * 1000, 2)
    r.trace["timings_ms"]["retrieval_total"] = round(retrieval_ms, 2)
    r.trace["context_tokens"] = _context_tokens(a)
    if log:
        assert res.ws.id is not None  # a stored row has its key
        with res.store.session() as s:
            s.add(QueryLog(workspace_id=res.ws.id, question=question, strategy=strategy, answer=a.text,
                           result=r.to_dict(), ms=round(retrieval_ms, 2),
                           asked_by=None if asked_by is None or asked_by == access.LOCAL else asked_by.name))
            s.commit()
    return r, a


def _context_tokens(a: Answer) -> int:
    c = a.context
    return count_tokens("\n".join(c.local + c.bridge + c.global_))


def ensure_sample(store: Store, settings: Settings) -> tuple[Workspace | None, BuildRun | None]:
    """Create the `sample` workspace from data/sample on first start and launch its build in the background; it
    belongs to the service identity and everyone signed in may browse and ask it (core/access.py).
    Returns the workspace and the run started (None when the sample already existed). With
    `storage.sample_on_start` off (STRATA_SAMPLE=0) nothing is created: the sample if present, else None."""
    ws = store.get_workspace(SAMPLE_NAME)
    if ws is not None or not settings.storage.sample_on_start:
        if ws is not None:  # (one from before workspaces had members)
            access.adopt(store, ws, access.service_user(settings).name, everyone="viewer")
        return ws, None
    ws = store.create_workspace(SAMPLE_NAME)
    access.adopt(store, ws, access.service_user(settings).name, everyone="viewer")  # everyone may browse and ask it
    ingest_paths(store, ws, [SAMPLE_DIR], settings)
    return ws, start_build(store, access.service_user(settings), ws, settings, backend="offline")


def start_build(store: Store, user: access.User, ws: Workspace, settings: Settings,
                backend: str | None = None) -> BuildRun:
    """Start a background build of `ws` unless one is already running; checks its model servers first, if any.
    access.Refused (logged) unless the user may build the workspace; the start is in the audit log."""
    access.require(store, user, ws, "build")
    run = active_run(store, ws)
    if run is not None:
        return run
    s = settings.model_copy(deep=True)
    if backend:
        s.backend.kind = backend  # type: ignore[assignment]
    from core.backends.servers import require_servers

    require_servers(s)
    run = create_run(store, ws, s)
    assert run.id is not None  # a stored row has its key
    launch_worker(s, run.id)
    return run


def retry_failed(store: Store, user: access.User, ws: Workspace, settings: Settings) -> BuildRun:
    """Start a build that retries the workspace's failed units (core/pipeline/failures.py) with the backend and model
    of its last build, which failed them: any build retries them, this one never swaps their backend."""
    s = settings.model_copy(deep=True)
    if ws.backend != "offline" and ws.chat_model:
        s.backend.chat_model = ws.chat_model
    return start_build(store, user, ws, s, backend=ws.backend)


def delete_workspace(store: Store, ws: Workspace, settings: Settings) -> None:
    """Delete the workspace, its vectors and every row built from it; refused (JobBusy, one line) while one of its
    runs is active: its worker would go on writing into a workspace that no longer exists."""
    check_idle(store, ws, "delete it once the run has finished, or stop the run first")
    delete_vectors(settings, ws.name)  # first: an unreachable vector server stops here, with nothing deleted
    store.delete_workspace(ws)
