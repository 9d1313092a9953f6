"""Shared fixtures: the bundled embedder (loaded once), the sample workspace (built once per session) and small
hand-written corpora for fast stage tests. Everything is real: SQLite through Store, chromadb on disk, MiniLM."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

# No hub downloads, no telemetry: the bundled model and local chromadb only.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DIR = ROOT / "data" / "sample"
SAMPLE_QUESTIONS = ROOT / "data" / "sample_questions.json"

# Four short documents that share names ("Lena Marsh", "Okoro Institute", "Tidewater Bridge"), so entity merging,
# relationships across documents and communities all have something to do.
TINY_DOCS: dict[str, str] = {
    "bridge.md": (
        "# Tidewater Bridge\n\n"
        "The Tidewater Bridge crosses the Salt River at Kelmouth. It was designed by Lena Marsh and opened in 2011. "
        "Harwick Engineering built it. The bridge carries the Kelmouth Railway over the river.\n"
    ),
    "marsh.md": (
        "# Lena Marsh\n\n"
        "Lena Marsh studied civil engineering at the Okoro Institute. Her doctoral adviser was Tomas Brandt. "
        "Lena Marsh later designed the Tidewater Bridge for Harwick Engineering.\n"
    ),
    "institute.txt": (
        "The Okoro Institute is a research university in Kelmouth. Tomas Brandt leads its Department of Hydraulics. "
        "The Okoro Institute tested scale models of the Tidewater Bridge in its flume laboratory.\n"
    ),
    "railway.txt": (
        "The Kelmouth Railway runs from Kelmouth to Arden Vale. The Kelmouth Railway was financed by the Arden "
        "Trust and built by Harwick Engineering. Trains have crossed the Tidewater Bridge since 2011.\n"
    ),
}

# The same kind of material as one JSONL file with external ids (d1..d4), for recall@k against known gold ids.
TINY_ROWS: list[dict] = [
    {"id": "d1", "title": "Tidewater Bridge",
     "text": "The Tidewater Bridge crosses the Salt River at Kelmouth. It was designed by Lena Marsh and opened "
             "in 2011."},
    {"id": "d2", "title": "Lena Marsh",
     "text": "Lena Marsh studied civil engineering at the Okoro Institute. Her doctoral adviser was Tomas Brandt."},
    {"id": "d3", "title": "Arden Orchards",
     "text": "Arden Orchards grows apples and pears in Arden Vale. The cider press of Arden Orchards opened in 1920."},
    {"id": "d4", "title": "Kelmouth Choir",
     "text": "The Kelmouth Choir sings every winter in Saint Bride Church. Its conductor is Ada Finnegan."},
]


class Built(NamedTuple):
    settings: object  # core.config.Settings
    store: object  # core.store.Store
    ws: object  # core.models.Workspace (as read after the build)
    embedder: object  # core.backends.embedders.MiniLMEmbedder


def _settings(home: Path):
    from core.config import Settings
    from tests.stores import configure

    s = Settings()
    s.storage.home = Path(home)
    return configure(s)


def build_workspace(home: Path, paths: list[Path], embedder, name: str = "w", settings=None, engine=None) -> Built:
    """Ingest `paths` into a fresh workspace under `home` and run a full build from this process: its units in this
    process, or on `engine` (core/pipeline/engine.py) when given."""
    from core.pipeline.factory import make_context
    from core.pipeline.runner import create_run, run_build
    from core.store import Store
    from core.workspace import ingest_paths
    from tests.stores import configure

    settings = settings or _settings(home)
    if Path(settings.storage.home) != Path(home):
        settings.storage.home = Path(home)
        configure(settings)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace(name)
    rep = ingest_paths(store, ws, paths, settings)
    assert rep.added and not rep.refusals, rep
    ctx = make_context(store, ws, settings, embedder=embedder)
    if engine is not None:
        ctx.use_engine(engine)
    run = create_run(store, ws, settings)
    events = list(run_build(ctx, run.id))
    assert events[-1].status == "done", events[-1]
    return Built(settings, store, store.require_workspace(name), embedder)


@pytest.fixture(scope="session")
def embedder():
    """The bundled all-MiniLM-L6-v2, loaded once for the whole session (loading takes several seconds)."""
    from core.backends.embedders import MiniLMEmbedder

    emb = MiniLMEmbedder()
    v = emb.embed(["warm up"])
    assert v.shape == (1, emb.dim)
    return emb


@pytest.fixture(scope="session")
def sample_built(tmp_path_factory, embedder) -> Built:
    """The sample corpus (data/sample, 15 documents) built once per session with default settings, offline."""
    home = tmp_path_factory.mktemp("strata_sample")
    return build_workspace(home, [SAMPLE_DIR], embedder, name="sample")


@pytest.fixture(scope="session")
def sample_resources(sample_built):
    """Query resources (store, index, embedder, graph view) over the built sample workspace."""
    from core.workspace import open_resources

    settings, store, ws, embedder = sample_built
    return open_resources(store, ws, settings, embedder)


def write_tiny_docs(d: Path) -> Path:
    """The four short documents of TINY_DOCS written into folder `d` (made if missing)."""
    d.mkdir(parents=True, exist_ok=True)
    for name, text in TINY_DOCS.items():
        (d / name).write_text(text, encoding="utf-8")
    return d


@pytest.fixture
def tiny_corpus(tmp_path) -> Path:
    """A folder of four short documents with shared names."""
    return write_tiny_docs(tmp_path / "tiny_corpus")


@pytest.fixture
def tiny_rows() -> list[dict]:
    """The rows of `tiny_jsonl` (id, title, text), for tests that need to know which text has which id."""
    return [dict(r) for r in TINY_ROWS]


@pytest.fixture
def tiny_jsonl(tmp_path) -> Path:
    """One JSONL file of four rows with external ids d1..d4."""
    p = tmp_path / "tiny.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in TINY_ROWS) + "\n", encoding="utf-8")
    return p


@pytest.fixture
def build(embedder) -> Callable[..., Built]:
    """build(home, paths, name="w", settings=None) -> Built: a full in-process build with the shared embedder."""

    def _build(home: Path, paths: list[Path], name: str = "w", settings=None) -> Built:
        return build_workspace(home, paths, embedder, name=name, settings=settings)

    return _build


@pytest.fixture
def make_settings() -> Callable[[Path], object]:
    """make_settings(home) -> default Settings with storage.home set."""
    return _settings
