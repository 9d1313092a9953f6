"""Units whose model call still fails after its retries (core/pipeline/failures.py), through a local server speaking the
Ollama API (tests/fake_ollama.py) whose replies fail for chosen prompts (`fake.fail_when`).

A failed unit is recorded with its reason, nothing is stored for it (no empty extraction, no empty report), the stage
goes on, the run finishes "with N failed units" (the CLI and the worker exit with EXIT_FAILED_UNITS), and the next
build retries it: then nothing is left failed and the graph is the graph of a build that never failed."""

from __future__ import annotations

import pytest
from sqlalchemy import func
from sqlmodel import select

from core import worker
from core.__main__ import main
from core.config import Settings
from core.models import BuildRun, Checkpoint, Community, Edge, FailedUnit, Node
from core.pipeline import failures
from core.pipeline.factory import make_context, open_index
from core.pipeline.failures import EXIT_FAILED_UNITS, failed_units
from core.pipeline.runner import create_run, run_build
from core.protocols import BackendError
from core.quality import variants as V
from core.store import Store
from core.workspace import ingest_paths
from tests.conftest import SAMPLE_DIR, TINY_DOCS, build_workspace
from tests.fake_ollama import FakeOllama, delimited
from tests.stores import configure

VECTORS = ("chunk", "statement", "entity", "community", "attribute", "high_level", "topic")
# the first sentence of one sample document: only its first chunk holds it (chunks overlap only at their ends)
TARGET = "Amara Okafor is a civil engineer best known as the designer of the sluice gates"


def _ollama(settings, url: str, retries: int = 2):
    settings.backend.kind = "ollama"
    settings.backend.ollama_host = url
    settings.backend.timeout_s = 10.0
    settings.backend.retries = retries
    settings.backend.backoff_s = 0.05
    return settings


def _home(home) -> Settings:
    s = Settings()
    s.storage.home = home
    return configure(s)


def _shape(store: Store, ws_id: int) -> tuple[dict, dict]:
    """Nodes by kind and edges by kind."""
    with store.session() as s:
        nodes = dict(s.exec(select(Node.kind, func.count()).where(Node.workspace_id == ws_id).group_by(Node.kind)).all())
        edges = dict(s.exec(select(Edge.kind, func.count()).where(Edge.workspace_id == ws_id).group_by(Edge.kind)).all())
    return nodes, edges


def _extracting(text: str):
    """fail_when: an extraction prompt whose text holds `text`."""
    return lambda prompt: any(text in block for block in delimited(prompt, "TEXT"))


def _reporting(name: str):
    """fail_when: a community report prompt whose material names `name`."""
    return lambda prompt: prompt.startswith("-Goal-\nWrite a report") and name in prompt


def _cli_env(monkeypatch, settings, url: str) -> None:
    """The CLI in this process on `settings`' stores and the fake server, with 3 attempts a call, little backoff."""
    from_env = Settings.from_env

    def quick(env=None):
        s = from_env(env)
        s.backend.retries, s.backend.backoff_s = 2, 0.05
        return s

    monkeypatch.setattr(Settings, "from_env", quick)
    monkeypatch.setenv("STRATA_HOME", str(settings.storage.home))
    monkeypatch.setenv("OLLAMA_HOST", url)
    for var, value in (("STRATA_DATABASE_URL", settings.storage.database_url),
                       ("STRATA_CHROMA_URL", settings.storage.chroma_url)):
        if value:
            monkeypatch.setenv(var, value)
        else:
            monkeypatch.delenv(var, raising=False)


def test_a_chunk_that_keeps_failing_is_a_failed_unit_and_the_next_build_makes_the_fault_free_graph(
        tmp_path, embedder, make_settings, monkeypatch, capsys):
    assert TARGET in (SAMPLE_DIR / "amara_okafor_profile.md").read_text(encoding="utf-8")
    with FakeOllama() as fake:
        ref = build_workspace(tmp_path / "ref", [SAMPLE_DIR], embedder, name="sample",
                              settings=_ollama(make_settings(tmp_path / "ref"), fake.url))
        want = _shape(ref.store, ref.ws.id)

        settings = make_settings(tmp_path / "h")
        _cli_env(monkeypatch, settings, fake.url)
        fake.fail_when = _extracting(TARGET)
        code = main(["build", "--workspace", "sample", "--backend", "ollama", "--quiet", str(SAMPLE_DIR)])
        err = capsys.readouterr().err
        assert code == EXIT_FAILED_UNITS == 5, err

        store = Store(settings.storage.db_url)
        ws = store.require_workspace("sample")
        with store.session() as s:
            chunks = s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "chunk",
                                                  Node.text.contains(TARGET))).all()  # type: ignore[attr-defined]
            run = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id)).one()
        assert len(chunks) == 1
        chunk = chunks[0]
        units = failed_units(store, ws.id)
        assert [(u.stage, u.unit, u.run_id) for u in units] == [("extract", chunk, run.id)]
        assert "extract" in units[0].reason and "500" in units[0].reason, units[0].reason
        assert units[0].attempts == 3 and "Amara Okafor" in units[0].label
        assert run.status == "done" and run.message == "Build finished with 1 failed unit"
        assert "finished with 1 failed unit" in err and f"extract\t{chunk}\t" in err
        # nothing stored for the chunk: no checkpoint, no mentions, no statements or relationships derived from it
        with store.session() as s:
            assert s.get(Checkpoint, (ws.id, "extract", chunk)) is None
            assert not s.exec(select(Edge).where(Edge.workspace_id == ws.id, Edge.src == chunk,
                                                 Edge.kind == "mentions")).all()
            assert not s.exec(select(Edge).where(Edge.workspace_id == ws.id, Edge.dst == chunk,
                                                 Edge.kind == "derived_from")).all()
            extracted = s.exec(select(func.count()).select_from(Checkpoint).where(
                Checkpoint.workspace_id == ws.id, Checkpoint.stage == "extract")).one()
        assert extracted == want[0]["chunk"] - 1, "every other chunk was extracted"
        assert _shape(store, ws.id) != want

        # the server recovers: the next build extracts the chunk, folds it in, and ends where a fault-free build ends
        fake.fail_when = None
        code = main(["build", "--workspace", "sample", "--backend", "ollama", "--quiet"])
        err = capsys.readouterr().err
        assert code == 0, err
        assert failed_units(store, ws.id) == []
        assert store.latest_run(ws.id).message == "Build finished"
        assert _shape(store, ws.id) == want
        mine, theirs = open_index(settings, "sample", embedder.name), open_index(ref.settings, "sample", embedder.name)
        assert {k: mine.count(k) for k in VECTORS} == {k: theirs.count(k) for k in VECTORS}


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory, embedder):
    """tiny_corpus built through the fake Ollama server with no fault: (corpus folder, nodes and edges by kind, ids of
    the communities with a report)."""
    corpus = tmp_path_factory.mktemp("tiny_corpus")
    for name, text in TINY_DOCS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    home = tmp_path_factory.mktemp("fault_free")
    with FakeOllama() as fake:
        ref = build_workspace(home, [corpus], embedder, settings=_ollama(_home(home), fake.url, retries=1))
    return corpus, _shape(ref.store, ref.ws.id), _reported(ref.store, ref.ws.id)


def _reported(store: Store, ws_id: int) -> set[str]:
    with store.session() as s:
        return set(s.exec(select(Community.id).where(Community.workspace_id == ws_id, Community.summary != "")))


def _faulty_build(tmp_path, corpus, embedder, url: str):
    """A workspace of `corpus` (settings, store, workspace) and a function that runs one build of it."""
    settings = _ollama(_home(tmp_path / "h"), url, retries=1)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [corpus], settings)

    def build():
        run = create_run(store, ws, settings)
        return run, list(run_build(make_context(store, ws, settings, embedder=embedder), run.id))

    return store, ws, build


def test_a_report_that_keeps_failing_is_recorded_not_stored_empty_and_written_by_the_next_build(
        tmp_path, fault_free, embedder):
    corpus, want, reported = fault_free
    with FakeOllama() as fake:
        store, ws, build = _faulty_build(tmp_path, corpus, embedder, fake.url)
        fake.fail_when = _reporting("Okoro Institute")
        run, events = build()
        units = failed_units(store, ws.id, run.id)
        assert events[-1].status == "done" and events[-1].message == f"Build finished with {len(units)} failed units"
        assert {u.stage for u in units} >= {"reports"}, [(u.stage, u.label) for u in units]
        assert all("Okoro Institute" in u.label and "500" in u.reason for u in units if u.stage == "reports")
        with store.session() as s:
            for u in units:
                if u.stage == "reports":  # absent: no title, summary or report written for it
                    c = s.get(Community, u.unit)
                    assert c is not None and (c.title, c.summary, c.report) == ("", "", {})
            # the stage went on: the other communities have their reports
            others = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.method == "leiden",
                                                    Community.summary != "")).all()
        assert others
        assert {r.stage: r.status for r in store.stage_runs(run.id)}["reports"] == "done"

        fake.fail_when = None
        _, events = build()
        assert events[-1].message == "Build finished"
        with store.session() as s:
            assert not s.exec(select(FailedUnit).where(FailedUnit.workspace_id == ws.id)).all()
        now = _reported(store, ws.id)
        assert {u.unit for u in units if u.stage == "reports"} <= now
        assert now == reported and _shape(store, ws.id) == want


@pytest.mark.parametrize("stage,fails", [
    # every summary entity call fails (which clusters hold a given entity follows HiRAG's UMAP + GMM: a
    # singleton is carried up without a call)
    ("layers", lambda p: "Meta attribute list:" in p and any(b.strip() for b in delimited(p, "ENTITIES"))),
    ("augment", lambda p: "Summarize what the material says about the entity" in p),
    ("lexical", lambda p: "Group them into topics" in p and "Arden Trust" in p),
])
def test_a_summary_that_keeps_failing_is_a_failed_unit_the_next_build_makes(tmp_path, fault_free, embedder, stage,
                                                                            fails):
    """HiRAG summary entities (the layer is kept as made, none built above it), NodeRAG attributes, HLG topics (their
    document gets none, nor a checkpoint): recorded, and the next build makes the fault-free graph."""
    corpus, want, reported = fault_free
    with FakeOllama() as fake:
        store, ws, build = _faulty_build(tmp_path, corpus, embedder, fake.url)
        fake.fail_when = fails
        run, events = build()
        units = failed_units(store, ws.id, run.id)
        assert units and {u.stage for u in units} == {stage}, [(u.stage, u.label) for u in units]
        assert events[-1].status == "done" and events[-1].message.startswith(f"Build finished with {len(units)} ")
        assert all("500" in u.reason for u in units)
        assert _shape(store, ws.id) != want
        fake.fail_when = None
        _, events = build()
        assert events[-1].message == "Build finished" and failed_units(store, ws.id) == []
        assert _shape(store, ws.id) == want and _reported(store, ws.id) == reported


def test_a_promote_job_whose_reports_fail_ends_with_failed_units(tmp_path, tiny_corpus, embedder, make_settings,
                                                                 capsys):
    with FakeOllama() as fake:
        b = build_workspace(tmp_path / "h", [tiny_corpus], embedder,
                            settings=_ollama(make_settings(tmp_path / "h"), fake.url, retries=1))
        index = make_context(b.store, b.ws, b.settings, embedder=embedder).index
        vs = V.defaults(b.store, b.ws.id, b.settings)
        list(V.run_variant(b.store, index, b.ws, "fine", V.VariantSettings(**{**vs.__dict__, "resolution": 4.0}),
                           b.settings))
        fake.fail_when = lambda prompt: prompt.startswith("-Goal-\nWrite a report")
        run = worker.create_job(b.store, b.ws, b.settings, "promote", {"variant": "fine"})
        code = worker.run_worker(b.store, run.id)
        out = capsys.readouterr().out
        units = failed_units(b.store, b.ws.id, run.id)
        assert units and {u.stage for u in units} <= {"reports", "augment"}
        assert code == EXIT_FAILED_UNITS, out
        row = b.store.latest_run(b.ws.id)
        assert row.id == run.id and row.status == "done"
        assert row.message == f"variant 'fine' promoted with {len(units)} failed unit{'s' if len(units) > 1 else ''}"
        assert f"run {run.id} failed unit: reports\t" in out


def test_a_server_failing_every_unit_fails_the_run(tmp_path, tiny_corpus, embedder, make_settings, monkeypatch):
    """Not a unit's failure: STREAK units failed in a row stop the run as failed; what was written is kept."""
    monkeypatch.setattr(failures, "STREAK", 3)
    with FakeOllama() as fake:
        settings = _ollama(make_settings(tmp_path / "h"), fake.url, retries=0)
        store = Store(settings.storage.db_url)
        ws = store.create_workspace("w")
        ingest_paths(store, ws, [tiny_corpus], settings)
        fake.fail_when = lambda prompt: True
        run = create_run(store, ws, settings)
        events = []
        with pytest.raises(BackendError, match=r"failed [34] units in a row"):  # (4: two calls in flight)
            for ev in run_build(make_context(store, ws, settings, embedder=embedder), run.id):
                events.append(ev)
        assert events[-1].status == "failed"
        assert store.latest_run(ws.id).status == "failed" and "in a row" in store.latest_run(ws.id).message
        assert store.counts(ws.id).get("chunk", 0) > 0, "chunks written before the failure are kept"
        assert len(failed_units(store, ws.id, run.id)) >= 3  # (and those already in flight)
