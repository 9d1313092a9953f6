"""How a build or job gets its working parts: the language backend, the embedder, the workspace's vector index, and
the `BuildContext` that carries them to the stages (core/pipeline/context.py)."""

from __future__ import annotations

from core.backends.embedders import MiniLMEmbedder, make_embedder, writer_of
from core.backends.language import make_backend
from core.backends.servers import backend_kind, embedder_kind, require_servers
from core.config import Settings
from core.index.vectors import VectorIndex, reopen_vector_stores
from core.index.writer import Writer, mismatch
from core.models import Workspace
from core.pipeline.context import BuildContext
from core.pipeline.engine import Engine
from core.pipeline.tasks import Parts, chosen_runtime
from core.protocols import BackendError, Embedder
from core.store import Store


def open_index(settings: Settings, ws_name: str, embedder_name: str) -> VectorIndex:
    """The workspace's vectors: on the Chroma server of `storage.chroma_url` when set, else embedded on disk."""
    from core.index.chroma import settings_auth

    return VectorIndex(settings.storage.vector_dir(ws_name), embedder_name, url=settings.storage.chroma_url,
                       workspace=ws_name, auth=settings_auth(settings.storage))


def delete_vectors(settings: Settings, ws_name: str) -> None:
    """Remove the workspace's vectors: its collections on the server (when there is one) and its directory (the
    embedded store; an older build's C-HNSW file)."""
    import shutil

    if settings.storage.chroma_url:
        from core.index.chroma import drop_server_workspace, settings_auth

        auth = settings_auth(settings.storage)
        drop_server_workspace(settings.storage.chroma_url, ws_name, auth.token, auth.ca)
    shutil.rmtree(settings.storage.vector_dir(ws_name), ignore_errors=True)
    # chromadb keeps one client per directory per process: a workspace made again under this name must not be
    # handed the deleted directory's (it writes into a database that is gone: "attempt to write a readonly database")
    reopen_vector_stores()


def settled_runtime(emb: Embedder, settings: Settings, engine: Engine | None = None) -> Embedder:
    """`emb` with its MiniLM runtime settled (BackendError when it cannot load): on a Dask cluster a worker loads it
    and the embedder here is pinned to the worker's choice (`MiniLMEmbedder.pin`), so a cluster build's lease holder,
    which embeds nothing itself, never imports torch (375 MiB of its memory on the 1M-token build); else loaded
    here."""
    if isinstance(emb, MiniLMEmbedder) and emb.runtime is None:
        if engine is not None and engine.distributed:
            runtime = engine.submit(chosen_runtime, Parts(settings, runtime=emb.requested
                                                                if emb.requested != "auto" else "")).result()
            emb.pin(runtime)
        else:
            emb.load()
    return emb


def workspace_embedder(settings: Settings, ws_name: str, strict: bool = True,
                       engine: Engine | None = None) -> Embedder:
    """The embedder for workspace `ws_name`: the configured one, with MiniLM on the runtime the workspace's vectors
    record (core/index/writer.py), so an extended, merged or re-embedded workspace gets the vectors its rebuild
    would. `strict` (a build or job, which writes vectors): a recorded runtime that STRATA_MINILM_RUNTIME overrides
    or that cannot load here (on `engine`'s workers when it is a cluster: `settled_runtime`) is refused with one line
    (`WriterMismatch`); else (a question) this host's own runtime stands in, its similarities within ~3e-3 of the
    recorded one's."""
    home = settings.storage.home / "models"
    rec = None
    if settings.embed.embedder == "minilm":
        rec = open_index(settings, ws_name, "minilm").recorded()
    if rec is None:
        return make_embedder(settings.embed, settings.backend, home)
    pinned = settings.embed.minilm_runtime
    if strict and pinned != "auto" and pinned != rec.runtime:
        raise mismatch(ws_name, rec, Writer(rec.embedder, pinned, rec.dim))
    if not strict:
        return embedder_on(settings, rec.runtime)
    try:
        return settled_runtime(make_embedder(settings.embed, settings.backend, home, runtime=rec.runtime), settings,
                               engine)
    except (BackendError, ValueError) as exc:  # a runtime this host cannot load, or does not know
        raise mismatch(ws_name, rec, str(exc)) from None


def embedder_on(settings: Settings, runtime: str) -> Embedder:
    """The configured embedder, MiniLM on `runtime` when that loads here, else on this host's own (for questions:
    its similarities within ~3e-3 of the recorded runtime's)."""
    home = settings.storage.home / "models"
    if not runtime or settings.embed.embedder != "minilm":
        return make_embedder(settings.embed, settings.backend, home)
    try:
        emb = make_embedder(settings.embed, settings.backend, home, runtime=runtime)
        writer_of(emb)
        return emb
    except (BackendError, ValueError):  # a runtime this host cannot load, or does not know
        return make_embedder(settings.embed, settings.backend, home)


def make_context(store: Store, ws: Workspace, settings: Settings, embedder: Embedder | None = None,
                 engine: Engine | None = None) -> BuildContext:
    """What a build or job works with, its units on `engine` when given (core/pipeline/engine.py `engine_for`). Its
    vectors are written as the workspace's collections record (refused with one line when `embedder` would write
    others)."""
    require_servers(settings)  # the model servers the backend and embedder need, if any: up, with their models
    emb = settled_runtime(embedder or workspace_embedder(settings, ws.name, engine=engine), settings, engine)
    index = open_index(settings, ws.name, emb.name)
    index.writer = writer_of(emb)
    rec = index.recorded()
    if rec is not None and rec != index.writer:
        raise mismatch(ws.name, rec, index.writer)
    ctx = BuildContext(
        store=store,
        ws=ws,
        settings=settings,
        backend=make_backend(settings, store),
        embedder=emb,
        index=index,
    )
    if engine is not None:
        ctx.use_engine(engine)
    return ctx


def job_settings(settings: Settings, ws: Workspace) -> Settings:
    """`settings` with the workspace's own embedder (and backend when that embedder is a model server's), for a job
    that embeds as the build did."""
    s = settings.model_copy(deep=True)
    s.embed.embedder = embedder_kind(ws.embedder or "")  # type: ignore[assignment]
    s.backend.kind = backend_kind(s.embed.embedder)  # type: ignore[assignment]
    return s
