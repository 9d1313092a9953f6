"""The "evaluate" job: an evaluation (core/evaluation/records.py) measured by the background worker through the
runner (core/worker.py plans it with `evaluate_plan`), with its progress rows, heartbeat and Stop.

Step "measure" answers every question with every strategy of the evaluation, question by question, and stores one
`EvaluationResult` per (question, strategy) as it goes, a question's strategies in one transaction: those rows are
the job's checkpoints, so a stopped job resumed (`resume_evaluation`: a new job of the same evaluation) or a killed
worker's run taken over measures only what is missing. As `core eval`, each strategy first answers the first
question once, untimed (the one-off loading of what it reads), then each question is timed alone; the workspace's
model backend, when it has one, runs the strategies' language steps as `ask` does. Step "figures" computes the
figures (metrics.summarize), keeps them on the evaluation's row and marks it done.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from core import access
from core.access import User
from core.backends.servers import backend_kind
from core.config import Settings
from core.evaluation import records
from core.evaluation.metrics import gold_ranks, summarize
from core.models import BuildRun, Evaluation, EvaluationResult, Workspace
from core.pipeline.context import BuildContext, JobPlan, Progress, Stage
from core.pipeline.factory import job_settings
from core.pipeline.runs import check_idle, insert_run, launch_worker
from core.retrieval.base import Resources, Retrieval, Strategy, get_strategy
from core.store import Store
from core.workspace import retrieval_llm

KIND = "evaluate"


def normalized(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def answer_in_context(answer: str | None, r: Retrieval) -> bool | None:
    """Whether the answer (case, punctuation and spacing aside) appears in the retrieved context; None without one."""
    if not answer or not normalized(answer):
        return None
    context = " ".join(f"{i.title} {i.text}" for items in r.sections.values() for i in items)
    return f" {normalized(answer)} " in f" {normalized(context)} "


def measure(res: Resources, strat: Strategy, q: dict, llm=None) -> tuple[list[str], float, bool | None]:
    """One question with one strategy: (ranked document ids, ms, answer in context). The ms include embedding the
    question: no vector kept from the strategy before (`Resources.embed_query`) is reused."""
    res.queries.clear()
    t0 = time.perf_counter()
    r = strat.retrieve(res, q["question"], llm=llm)
    ms = (time.perf_counter() - t0) * 1000
    ranked = list(dict.fromkeys(s.document_id for s in r.sources))
    return ranked, ms, answer_in_context(q.get("answer"), r)


def _load(ctx: BuildContext, eval_id: int) -> Evaluation:
    ev = records.get_evaluation(ctx.store, ctx.ws_id, eval_id)
    if ev is None:
        raise ValueError(f"no evaluation {eval_id} in workspace {ctx.ws.name!r}")
    return ev


def measure_stage(ctx: BuildContext, eval_id: int) -> Iterator[Progress]:
    ev = _load(ctx, eval_id)
    assert ev.id is not None
    qs, names = ev.questions, list(ev.strategies)
    settings = ctx.settings.model_copy(deep=True)
    settings.retrieval.max_sources = max(settings.retrieval.max_sources, max(ev.ks))
    res = Resources(store=ctx.store, ws=ctx.ws, settings=settings, embedder=ctx.embedder, index=ctx.index)
    llm = retrieval_llm(ctx.backend)
    done = records.measured(ctx.store, ev)
    left = [i for i in range(len(qs)) if any((i, n) not in done for n in names)]
    before = len(qs) - len(left)
    records.set_fields(ctx.store, ev.id, status="running")
    yield Progress(before, len(qs), f"{before} of {len(qs)} questions measured before" if before else
                   f"{len(qs)} questions × {len(names)} strategies", {"measured": 0, "resumed_at": before})
    strategies = {n: get_strategy(n) for n in names}
    for n in names:  # the one-off loading, untimed (as core eval); the runner stops here too when asked
        if any((i, n) not in done for i in left):
            strategies[n].retrieve(res, qs[0]["question"], llm=llm)
            yield Progress(before, len(qs), f"{n} loaded", {"measured": 0, "resumed_at": before})
    made = 0
    for i in left:
        q = qs[i]
        rows = []
        for n in names:
            if (i, n) in done:
                continue
            ranked, ms, aic = measure(res, strategies[n], q, llm)
            rows.append(EvaluationResult(workspace_id=ctx.ws_id, evaluation_id=ev.id, question=i, strategy=n,
                                         ranked=ranked, found=gold_ranks(ranked, q["gold"]), ms=round(ms, 3),
                                         answer_in_context=aic))
        with ctx.store.session() as s:
            s.add_all(rows)
            s.commit()
        made += 1
        yield Progress(before + made, len(qs), f"question {before + made} of {len(qs)} measured",
                       {"measured": made, "resumed_at": before})


def figures_stage(ctx: BuildContext, eval_id: int) -> Iterator[Progress]:
    ev = _load(ctx, eval_id)
    assert ev.id is not None
    yield Progress(0, 1, "bootstrap intervals")
    figures = summarize(ev, records.results(ctx.store, ev))
    records.set_fields(ctx.store, ev.id, meta=dict(ev.meta or {}) | {"figures": figures})
    records.mark_done(ctx.store, ev.id)
    yield Progress(1, 1, f"figures of {len(figures)} strategies", {"strategies": len(figures)})


def evaluate_steps(eval_id: int) -> list[tuple[str, str, Stage]]:
    def measure_step(ctx: BuildContext) -> Iterator[Progress]:
        return measure_stage(ctx, eval_id)

    def figures_step(ctx: BuildContext) -> Iterator[Progress]:
        return figures_stage(ctx, eval_id)

    return [("measure", "Measure every question with every strategy", measure_step),
            ("figures", "Figures with bootstrap intervals", figures_step)]


def evaluate_plan(params: dict) -> JobPlan:
    """The job's steps (core/worker.py PLANNERS["evaluate"]); it changes no graph row, so no version bump."""
    try:
        eval_id = int(params["evaluation"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("name the evaluation to run") from None
    return JobPlan(evaluate_steps(eval_id), label=f"Evaluation {eval_id}", done_message=f"evaluation {eval_id} measured")


def evaluation_settings(settings: Settings, ws: Workspace) -> Settings:
    """The caller's settings with the workspace's own embedder and the backend it was built with (`core eval`)."""
    s = job_settings(settings, ws)
    s.backend.kind = backend_kind(ws.backend)  # type: ignore[assignment]
    return s


def create_job(store: Store, ws: Workspace, settings: Settings, ev: Evaluation) -> BuildRun:
    """A queued "evaluate" job of `ev` (refused with JobBusy while a run of the workspace is active); the
    evaluation's row records it as its run. As core/worker.py `create_job` (which this layer may not import)."""
    check_idle(store, ws)
    plan = evaluate_plan({"evaluation": ev.id})
    run = insert_run(store, ws, settings, [(n, label) for n, label, _ in plan.steps], KIND,
                     {"evaluation": ev.id, "label": plan.label}, plan.label)
    assert ev.id is not None
    records.set_fields(store, ev.id, run_id=run.id, status="queued" if ev.status != "done" else ev.status)
    return run


def start_evaluation(store: Store, user: User, ws: Workspace, settings: Settings, questions: list[dict],
                     strategies: list[str] | None = None, ks=records.KS, name: str = "",
                     launch: bool = True) -> tuple[Evaluation, BuildRun]:
    """Record an evaluation and start its job in the background (`launch`; else the caller runs it). Refused
    (access.Refused) unless the user may evaluate the workspace, (JobBusy) while a run of it is active."""
    access.require(store, user, ws, "evaluate")
    check_idle(store, ws)
    s = evaluation_settings(settings, ws)
    ev = records.create_evaluation(store, ws, questions, strategies, ks, name, embedder=ws.embedder,
                                   backend=s.backend.kind)
    run = create_job(store, ws, s, ev)
    if launch:
        assert run.id is not None
        launch_worker(s, run.id)
    return records.get_evaluation(store, ws.id or 0, ev.id or 0) or ev, run


def resume_evaluation(store: Store, user: User, ws: Workspace, settings: Settings, eval_id: int,
                      launch: bool = True) -> BuildRun:
    """A new job of a stopped (or failed) evaluation: it measures only the questions not measured yet."""
    access.require(store, user, ws, "evaluate")
    ev = records.get_evaluation(store, ws.id or 0, eval_id)
    if ev is None:
        raise ValueError(f"no evaluation {eval_id} in workspace {ws.name!r}")
    s = evaluation_settings(settings, ws)
    run = create_job(store, ws, s, ev)
    if launch:
        assert run.id is not None
        launch_worker(s, run.id)
    return run


def rerun_evaluation(store: Store, user: User, ws: Workspace, settings: Settings, eval_id: int,
                     launch: bool = True) -> tuple[Evaluation, BuildRun]:
    """The same questions, strategies and ks measured again on the workspace as it is now (after a merge
    decision, a promote or a rebuild): a new evaluation, comparable with the old one (same question hash)."""
    ev = records.get_evaluation(store, ws.id or 0, eval_id)
    if ev is None:
        raise ValueError(f"no evaluation {eval_id} in workspace {ws.name!r}")
    return start_evaluation(store, user, ws, settings, ev.questions, ev.strategies, ev.ks, ev.name, launch)
