"""The stored evaluations of a workspace: an `Evaluation` row per evaluation (what it measured) and its
`EvaluationResult` rows (one per question and strategy measured). An evaluation belongs to its workspace: every
read takes the workspace's id and finds nothing of another's."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import col, delete, select

from core.evaluation.metrics import BASELINES
from core.evaluation.questions import check_questions, question_hash
from core.ids import owned
from core.models import UNFINISHED, BuildRun, Community, Evaluation, EvaluationResult, Workspace, is_active, utcnow
from core.retrieval.base import get_strategy, strategy_names
from core.store import Store

KS = (2, 5, 10)


def default_strategies() -> list[str]:
    """Every registered strategy (the baselines among them)."""
    return strategy_names()


def with_baselines(strategies: list[str] | None) -> list[str]:
    """The chosen strategies (default: all) with the dense and BM25 baselines always added, each known."""
    names = list(dict.fromkeys(list(strategies or default_strategies()) + list(BASELINES)))
    for n in names:
        get_strategy(n)  # an unknown name is said now (KeyError)
    return names


def partition_name(store: Store, ws_id: int) -> str:
    """The Leiden partition retrieval reads: the promoted variant's name, or "built"."""
    with store.session() as s:
        data = s.exec(select(Community.data).where(Community.workspace_id == ws_id, Community.method == "leiden")
                      .limit(1)).first()
    return str((data or {}).get("variant") or "built")


def create_evaluation(store: Store, ws: Workspace, questions: list[dict], strategies: list[str] | None = None,
                      ks: tuple[int, ...] | list[int] = KS, name: str = "", embedder: str = "",
                      backend: str = "") -> Evaluation:
    """A queued evaluation of `questions` (checked: each with a text and known gold) over the strategies (with
    the baselines) and ks, recording what it measures."""
    assert ws.id is not None  # a stored workspace
    qs = check_questions(questions)
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError("k must be whole numbers >= 1")
    names = with_baselines(strategies)
    ev = Evaluation(workspace_id=ws.id, name=name or f"{len(qs)} questions", questions=qs,
                    question_hash=question_hash(qs), strategies=names,
                    baselines=[n for n in names if n in BASELINES], ks=ks, build_version=ws.build_version,
                    backend=backend or ws.backend, embedder=embedder or ws.embedder,
                    partition=partition_name(store, ws.id),
                    meta={"generated": sum(bool(q.get("generated")) for q in qs)})
    with store.session() as s:
        s.add(ev)
        s.commit()
        s.refresh(ev)
    return ev


def describe(ev: Evaluation) -> str:
    """An evaluation named for a picker: its name (unless it only counts the questions), build, questions, time."""
    gen = (ev.meta or {}).get("generated", 0)
    n = f"{len(ev.questions)} questions"
    return ((f"{ev.name} · " if ev.name != n else "") + f"build {ev.build_version} · {n}"
            + (f" ({gen} generated)" if gen else "") + f" · {ev.created_at:%Y-%m-%d %H:%M} UTC")


def get_evaluation(store: Store, ws_id: int, eval_id: int) -> Evaluation | None:
    with store.session() as s:
        return owned(s, Evaluation, ws_id, eval_id)


def list_evaluations(store: Store, ws_id: int) -> list[Evaluation]:
    """The workspace's evaluations, newest first."""
    with store.session() as s:
        return list(s.exec(select(Evaluation).where(Evaluation.workspace_id == ws_id)
                           .order_by(col(Evaluation.created_at).desc(), col(Evaluation.id).desc())))


def status(store: Store, ev: Evaluation) -> str:
    """done, or its job's status (queued, running, cancelling, cancelled, failed; "interrupted" when its worker
    died and no worker has taken it over yet), or "queued" before one. Done only once its job has let go of the
    workspace too: between the last result and the job's end the evaluation is still "running", so a page that
    sees "done" can start the next job at once."""
    if ev.run_id is None:
        return ev.status
    with store.session() as s:
        run = owned(s, BuildRun, ev.workspace_id, ev.run_id)
    if run is None:
        return ev.status
    if run.status in UNFINISHED and not is_active(run, store.now()):
        return ev.status if ev.status == "done" else "interrupted"
    return ev.status if ev.status == "done" and run.status not in UNFINISHED else run.status


def outdated(ws: Workspace, ev: Evaluation) -> bool:
    """The workspace changed since `ev` measured it (a rebuild, a merge decision, a promote: each bumps the build
    version): the page offers to re-run it (job.rerun_evaluation)."""
    return ws.build_version != ev.build_version


def set_fields(store: Store, eval_id: int, **fields) -> None:
    with store.session() as s:
        ev = s.get(Evaluation, eval_id)
        assert ev is not None
        for k, v in fields.items():
            setattr(ev, k, v)
        s.add(ev)
        s.commit()


def mark_done(store: Store, eval_id: int) -> None:
    set_fields(store, eval_id, status="done", finished_at=utcnow())


def results(store: Store, ev: Evaluation) -> list[EvaluationResult]:
    """Every measured (question, strategy) of `ev`, by question then strategy."""
    with store.session() as s:
        return list(s.exec(select(EvaluationResult).where(EvaluationResult.workspace_id == ev.workspace_id,
                                                          EvaluationResult.evaluation_id == ev.id)
                           .order_by(col(EvaluationResult.question), col(EvaluationResult.strategy))))


def measured(store: Store, ev: Evaluation) -> set[tuple[int, str]]:
    """(question index, strategy) already measured: the job's checkpoints."""
    with store.session() as s:
        return set(s.exec(select(EvaluationResult.question, EvaluationResult.strategy)
                          .where(EvaluationResult.workspace_id == ev.workspace_id,
                                 EvaluationResult.evaluation_id == ev.id)).all())


def count_results(store: Store, ev: Evaluation) -> int:
    with store.session() as s:
        return s.exec(select(func.count()).select_from(EvaluationResult)
                      .where(EvaluationResult.evaluation_id == ev.id)).one()


def delete_evaluation(store: Store, ws_id: int, eval_id: int) -> None:
    with store.session() as s:
        s.exec(delete(EvaluationResult).where(col(EvaluationResult.workspace_id) == ws_id,
                                              col(EvaluationResult.evaluation_id) == eval_id))
        s.exec(delete(Evaluation).where(col(Evaluation.workspace_id) == ws_id, col(Evaluation.id) == eval_id))
        s.commit()


def latest_evaluation(store: Store, ws_id: int) -> Evaluation | None:
    """The newest evaluation (the page offers to re-run it after a merge, promote or rebuild)."""
    evs = list_evaluations(store, ws_id)
    return evs[0] if evs else None
