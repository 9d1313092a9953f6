"""The evaluation engine (core/evaluation) on real builds: a subset of the shared hotpotqa set (eight questions,
their gold passages and sixteen others, built offline) and the sample.

* the "evaluate" job runs through the runner and the worker: progress per question, Stop, a worker killed
  mid-run and its run taken over; no (question, strategy) is measured twice (calls counted), every one once;
* its recall@k equal `core.eval.evaluate`'s (what `python -m core eval` prints) on the same workspace and queries;
* a re-run of the same set compares with zero change; the export holds every result;
* the probe set is deterministic for a seed, its gold right by construction, and a model's wording is used only
  when it is a question (a real HTTP server speaking the Ollama API).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import select

from core import access, worker
from core import eval as core_eval
from core.evaluation import job as J
from core.evaluation import probes as P
from core.evaluation import records as R
from core.evaluation.compare import compare
from core.evaluation.export import export_csv, export_dict
from core.evaluation.inspect import open_question
from core.evaluation.metrics import gold_ranks
from core.evaluation.questions import read_questions
from core.models import Document
from core.pipeline.factory import make_context
from core.pipeline.lease import Lease
from core.pipeline.runner import run_job
from core.pipeline.runs import active_run, get_run, request_cancel
from core.retrieval.base import get_strategy
from core.workspace import open_resources
from tests.conftest import build_workspace

SHARED = Path("/work/shared/eval/hotpotqa")
STRATEGIES = ["hirag", "graphrag-local", "noderag", "hlg-statement"]  # with the baselines naive and bm25 added


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory, embedder):
    if not SHARED.exists():
        pytest.skip("the shared eval sets are not on this machine")
    queries = [json.loads(x) for x in (SHARED / "queries.jsonl").read_text().splitlines()[:8]]
    corpus = [json.loads(x) for x in (SHARED / "corpus.jsonl").read_text().splitlines()]
    gold = {str(g) for q in queries for g in q["gold_ids"]}
    rows = [r for r in corpus if str(r["id"]) in gold] + [r for r in corpus if str(r["id"]) not in gold][:16]
    home = tmp_path_factory.mktemp("eval_hotpot")
    (home / "in").mkdir()
    (home / "in" / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    qfile = home / "queries.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in queries))
    built = build_workspace(home / "home", [home / "in" / "corpus.jsonl"], embedder, name="hotpot")
    return built, qfile


def _questions(built, qfile):
    qs = read_questions(built.store, built.ws.id, qfile.read_text(), qfile.name)
    assert len(qs.questions) == 8 and not qs.rejected, qs.rejected
    return qs.questions


def test_the_job_stops_and_resumes_after_a_kill_measuring_each_question_once(hotpot, monkeypatch):
    built, qfile = hotpot
    store, ws, settings = built.store, built.ws, built.settings
    ev = R.create_evaluation(store, ws, _questions(built, qfile), STRATEGIES)
    names = ev.strategies
    assert names == STRATEGIES + ["naive", "bm25"] and ev.baselines == ["naive", "bm25"] and ev.ks == [2, 5, 10]
    calls: Counter = Counter()
    real = J.measure

    def counting(res, strat, q, llm=None):
        calls[(q["id"], strat.name)] += 1
        return real(res, strat, q, llm)

    monkeypatch.setattr(J, "measure", counting)
    plan = worker.plan_job("evaluate", {"evaluation": ev.id})
    ctx = make_context(store, ws, settings, embedder=built.embedder)

    run = J.create_job(store, ws, settings, ev)  # 1. stopped by the user after two questions
    assert [r.stage for r in store.stage_runs(run.id)] == ["measure", "figures"]
    events = []
    for e in run_job(ctx, run.id, plan):
        events.append(e)
        if e.stage == "measure" and e.counts.get("measured") == 2:
            request_cancel(store, run.id)
    assert events[-1].status == "cancelled" and get_run(store, run.id).status == "cancelled"
    assert R.count_results(store, ev) == 2 * len(names) and sum(calls.values()) == 2 * len(names)
    assert R.status(store, R.get_evaluation(store, ws.id, ev.id)) == "cancelled"
    progress = [(e.done, e.total) for e in events if e.stage == "measure" and e.counts.get("measured")]
    assert progress == [(1, 8), (2, 8)]

    run2 = J.create_job(store, ws, settings, ev)  # 2. resumed, then its worker dies after two more questions
    lease = Lease(store, run2.id, lease_s=0.6)
    assert lease.claim()
    gen = run_job(ctx, run2.id, plan, lease=lease)
    first = None
    for e in gen:
        if first is None and "resumed_at" in e.counts:
            first = (e.done, e.total, e.counts["resumed_at"])
        if e.stage == "measure" and e.counts.get("measured") == 2:
            break
    gen.close()  # no final status written: the run stays "running", its heartbeat stops
    assert first == (2, 8, 2), "resumed at the third question"
    assert get_run(store, run2.id).status == "running" and R.count_results(store, ev) == 4 * len(names)
    time.sleep(1.5)  # silent past its lease: another worker may take it over
    assert R.status(store, R.get_evaluation(store, ws.id, ev.id)) == "interrupted"
    assert worker.run_worker(store, run2.id, lease_s=0.6) == 0  # 3. the background worker's path finishes it
    assert get_run(store, run2.id).status == "done" and active_run(store, ws) is None
    assert set(calls) == {(q["id"], n) for q in ev.questions for n in names}
    assert set(calls.values()) == {1}, "a question measured once is never measured again"
    done = R.get_evaluation(store, ws.id, ev.id)
    assert R.status(store, done) == "done" and set(done.meta["figures"]) == set(names)
    assert done.meta["figures"]["naive"]["baseline"] == "dense" and done.meta["figures"]["hirag"]["baseline"] is None


def test_the_figures_equal_core_eval_and_a_rerun_compares_with_zero_change(hotpot):
    built, qfile = hotpot
    store, ws, settings = built.store, built.ws, built.settings
    user = access.service_user(settings)
    ev, run = J.start_evaluation(store, user, ws, settings, _questions(built, qfile), STRATEGIES, launch=False)
    ctx = make_context(store, ws, J.evaluation_settings(settings, ws), embedder=built.embedder)
    assert list(run_job(ctx, run.id, worker.plan_job("evaluate", {"evaluation": ev.id})))[-1].status == "done"
    ev = R.get_evaluation(store, ws.id, ev.id)
    ours = ev.meta["figures"]

    cli = settings.model_copy(deep=True)
    cli.retrieval.max_sources = max(cli.retrieval.max_sources, 10)  # as cmd_eval does
    res = open_resources(store, ws, cli, built.embedder)
    theirs = core_eval.evaluate(res, core_eval.load_queries(qfile), ev.strategies, [2, 5, 10])
    for name in ev.strategies:
        for k in (2, 5, 10):
            assert ours[name][f"recall@{k}"]["value"] == theirs[name][f"recall@{k}"], (name, k)
        assert ours[name]["questions"] == theirs[name]["queries"] == 8
        assert ours[name]["answer_in_context"]["n"] == 8  # every hotpotqa question gives its answer
    assert any(ours[n]["recall@10"]["value"] > 0 for n in ev.strategies)

    view = open_question(open_resources(store, ws, settings, built.embedder), ev, 1)  # the page's question view
    assert set(view.retrievals) == set(ev.strategies) and not view.stale and not R.outdated(ws, ev)
    assert [g["key"] for g in view.question["gold"]] == ["13", "17"]  # by gold_ids, its gold_titles not twice
    assert view.gold_documents == [d for g in ev.questions[1]["gold"] for d in g["docs"]]
    for name, r in view.retrievals.items():  # made again, they rank as the job stored
        assert gold_ranks(list(dict.fromkeys(x.document_id for x in r.sources)), view.question["gold"]) == \
            view.found[name], name
        if any(view.found[name]):
            assert {c for x in r.sources for c in x.chunk_ids} & view.gold_nodes, name

    again, run2 = J.rerun_evaluation(store, user, ws, settings, ev.id, launch=False)
    assert again.id != ev.id and again.question_hash == ev.question_hash
    assert list(run_job(ctx, run2.id, worker.plan_job("evaluate", {"evaluation": again.id})))[-1].status == "done"
    again = R.get_evaluation(store, ws.id, again.id)
    diff = compare(ev, R.results(store, ev), again, R.results(store, again))
    for name in ev.strategies:
        for key, fig in diff["strategies"][name].items():
            if key != "answer_in_context" or fig is not None:
                assert (fig["delta"], fig["low"], fig["high"]) == (0.0, 0.0, 0.0), (name, key)
        assert diff["wins"][name] == diff["losses"][name] == 0
    assert [e.id for e in R.list_evaluations(store, ws.id)][:2] == [again.id, ev.id]

    exported = export_dict(ev, R.results(store, ev))
    assert len(exported["results"]) == 8 * len(ev.strategies) and exported["evaluation"]["question_hash"]
    lines = export_csv(ev, R.results(store, ev)).splitlines()
    assert len(lines) == 1 + 8 * len(ev.strategies) and lines[0].startswith("question_id,question,generated")

    viewer = access.signed_in(settings, "bob@example.org")  # an evaluation is its workspace's: Bob has no role
    with pytest.raises(access.Refused):
        J.start_evaluation(store, viewer, ws, settings, ev.questions, launch=False)


def test_probes_are_deterministic_for_a_seed_with_their_gold_right_by_construction(sample_built):
    store, ws = sample_built.store, sample_built.ws
    one = P.probe_set(store, ws.id, 6, 6, seed=3)
    assert one == P.probe_set(store, ws.id, 6, 6, seed=3)
    assert one != P.probe_set(store, ws.id, 6, 6, seed=4)
    multi = [q for q in one if q["kind"] == "multi-hop"]
    single = [q for q in one if q["kind"] == "single-hop"]
    assert len(multi) == 6 and len(single) == 6 and all(q["generated"] for q in one)
    assert [q["id"] for q in one] == [f"p{i}" for i in range(1, 13)]
    with store.session() as s:
        text = dict(s.exec(select(Document.id, Document.text).where(Document.workspace_id == ws.id)).all())
    for q in multi:  # two documents, both naming the entity that connects them
        a, b = (g["docs"][0] for g in q["gold"])
        assert a != b
        for d in (a, b):
            assert q["answer"].lower() in text[d].lower(), (q, d)
    for q in single:  # the statement's document holds the blanked name
        (d,) = q["gold"][0]["docs"]
        assert q["answer"].lower() in text[d].lower() and "___" in q["question"]


def test_a_model_words_the_probes_and_a_reply_that_is_no_question_keeps_the_template(sample_built):
    from core.backends.ollama_backend import OllamaBackend
    from core.config import BackendSettings
    from tests.fake_ollama import FakeOllama, Reply

    store, ws = sample_built.store, sample_built.ws
    template = P.probe_set(store, ws.id, 2, 1, seed=5)
    with FakeOllama() as fake:
        fake.script["/api/chat"].append(Reply(content="Which thread ties these two together?"))
        backend = OllamaBackend(BackendSettings(ollama_host=fake.url), cache=None)
        worded = P.probe_set(store, ws.id, 2, 1, seed=5, backend=backend)
    assert worded[0]["question"] == "Which thread ties these two together?" != template[0]["question"]
    # the unscripted replies are plain answers, no question: the template's wording stays
    assert [q["question"] for q in worded[1:]] == [q["question"] for q in template[1:]]
    assert [q["gold"] for q in worded] == [q["gold"] for q in template]


def test_the_evaluate_page_shows_the_figures_core_eval_measures(hotpot, monkeypatch):
    """The Evaluate page (AppTest, the app on this home) draws, per strategy, the recall@k `core.eval` measures on
    the same workspace and questions (what `python -m core eval` prints), each with its interval, the baselines
    marked."""
    import re

    from tests.ui.conftest import app_home, open_page

    built, qfile = hotpot
    store, ws, settings = built.store, built.ws, built.settings
    ev, run = J.start_evaluation(store, access.service_user(settings), ws, settings, _questions(built, qfile),
                                 ["hirag", "archrag"], launch=False)
    ctx = make_context(store, ws, J.evaluation_settings(settings, ws), embedder=built.embedder)
    assert list(run_job(ctx, run.id, worker.plan_job("evaluate", {"evaluation": ev.id})))[-1].status == "done"
    cli = settings.model_copy(deep=True)
    cli.retrieval.max_sources = max(cli.retrieval.max_sources, 10)  # as cmd_eval does
    theirs = core_eval.evaluate(open_resources(store, ws, cli, built.embedder), core_eval.load_queries(qfile),
                                ev.strategies, [2, 5, 10])

    monkeypatch.setenv("STRATA_SAMPLE", "0")  # the app's only workspace is this one
    with app_home(Path(settings.storage.home)):
        at = open_page("views/evaluate.py", "Evaluate")
        at.selectbox(key="ev_pick").set_value(ev.id).run()
        table = next(d.value for d in at.dataframe if "recall@2" in d.value.columns)  # (AppTest keeps no key)
    labels = {get_strategy(n).label: n for n in ev.strategies}
    shown = {}
    for _, row in table.iterrows():
        name = labels[re.sub(r"\s+◆ .*$", "", row["strategy"])]
        shown[name] = row
        assert ("◆" in row["strategy"]) == (name in ("naive", "bm25")), row["strategy"]
    assert set(shown) == set(ev.strategies)
    for name in ev.strategies:
        for k in (2, 5, 10):
            value, low, high = map(float, re.findall(r"\d+\.\d+", shown[name][f"recall@{k}"]))
            assert value == pytest.approx(theirs[name][f"recall@{k}"], abs=5e-4), (name, k)
            assert low <= value <= high


def test_an_evaluation_through_a_model_server_failing_a_third_of_its_calls_measures_what_a_sound_one_does(hotpot):
    """The strategies' language steps (GraphRAG's map, ArchRAG's filter, HLG's keywords and rerank) on a model server
    of which a third of the chat calls fail (HTTP 500, 503, malformed JSON): the evaluate job retries them and
    finishes with the recall the same questions get from a server that never fails."""
    from core.backends.ollama_backend import OllamaBackend
    from tests.fake_ollama import FakeOllama, Faults

    built, qfile = hotpot
    store, ws = built.store, built.ws
    names = ["graphrag-global", "archrag", "hlg-statement"]
    s = built.settings.model_copy(deep=True)
    s.backend.kind = "ollama"  # type: ignore[assignment]
    s.backend.backoff_s = 0.01
    with FakeOllama() as sound:
        s.backend.ollama_host = sound.url
        theirs = core_eval.evaluate(open_resources(store, ws, s, built.embedder), core_eval.load_queries(qfile),
                                    names + ["naive", "bm25"], [2, 5, 10], llm=OllamaBackend(s.backend, cache=None))
        assert sound.chat_requests > 0
    with FakeOllama() as faulty:
        faulty.faults = Faults(share=0.33, seed=3, kinds=("500", "503", "malformed"))
        s.backend.ollama_host = faulty.url
        ev = R.create_evaluation(store, ws, _questions(built, qfile), names, backend="ollama")
        run = J.create_job(store, ws, s, ev)
        ctx = make_context(store, ws, s, embedder=built.embedder)
        assert list(run_job(ctx, run.id, J.evaluate_plan({"evaluation": ev.id})))[-1].status == "done"
        assert sum(faulty.injected.values()) > 0
    ours = R.get_evaluation(store, ws.id, ev.id).meta["figures"]
    for name in ev.strategies:
        for k in (2, 5, 10):
            assert ours[name][f"recall@{k}"]["value"] == theirs[name][f"recall@{k}"], (name, k)
