"""The recall effect of a Leiden partition, for the What-if tab beside its NMI and ARI: what the workspace's newest
question set measured while each partition was the one retrieval read.

Retrieval reads the promoted partition only (GraphRAG local and global read the Leiden communities, their reports
and vectors, which a promote writes), so a variant's recall is measured by promoting it and re-running the
evaluation (the Evaluate page offers it); promoting the snapshot `before-…` undoes it. An evaluation records the
partition it measured (`Evaluation.partition`: the promoted variant's name, or "built"); a promote's snapshot
records the name its partition was measured under (`was`). Per partition, the newest finished evaluation of the
newest question set is read, and its change against the current partition's is computed with the paired bootstrap
of core/evaluation/compare.py."""

from __future__ import annotations

from core.evaluation import records
from core.evaluation.compare import compare
from core.models import Evaluation, Workspace
from core.store import Store

READS_PARTITION = ("graphrag-local", "graphrag-global")  # the strategies that read the Leiden partition


def measured_name(variant: str, settings: dict | None) -> str:
    """The name evaluations measured variant `variant` under: a snapshot's original name, else its own."""
    return str((settings or {}).get("was") or variant) if (settings or {}).get("snapshot") else variant


def recall_effect(store: Store, ws: Workspace, k: int = 5) -> dict | None:
    """None without a finished evaluation; else {"evaluation": the newest one's name, "k": the k read (the
    largest of the set's ks not above `k`), "current": the current partition's name, "partitions": {name: {
    "evaluation": id, "strategies": {strategy: {"recall": value, "change": paired Change dict vs the current
    partition or None}}}}} over READS_PARTITION and the newest evaluation's best graph strategy."""
    assert ws.id is not None
    done = [e for e in records.list_evaluations(store, ws.id) if e.status == "done"]
    if not done:
        return None
    ref = done[0]
    newest: dict[str, Evaluation] = {}
    for e in done:
        if e.question_hash == ref.question_hash:
            newest.setdefault(e.partition or "built", e)
    ks = [x for x in ref.ks if x <= k] or [min(ref.ks)]
    key = f"recall@{max(ks)}"
    current = records.partition_name(store, ws.id)
    base = newest.get(current)
    base_rows = records.results(store, base) if base is not None else []
    out: dict = {"evaluation": ref.name, "k": max(ks), "current": current, "partitions": {}}
    top = (ref.meta or {}).get("figures") or {}
    best = max((s for s in top if s not in records.BASELINES), key=lambda s: top[s][key]["value"], default=None)
    wanted = list(READS_PARTITION) + ([best] if best and best not in READS_PARTITION else [])
    for name, ev in newest.items():
        figs = (ev.meta or {}).get("figures") or {}
        names = [s for s in wanted if s in figs]
        change = (compare(base, base_rows, ev, records.results(store, ev))["strategies"]
                  if base is not None and ev.id != base.id else {})
        out["partitions"][name] = {"evaluation": ev.id, "build": ev.build_version, "strategies": {
            s: {"recall": figs[s][key]["value"], "change": (change.get(s) or {}).get(key)} for s in names}}
    return out
