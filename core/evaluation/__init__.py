"""Evaluating retrieval on a workspace's own documents (issue 25, the engine under the Evaluate page).

* questions.py: a questions file brought by the user (jsonl, csv or a JSON list), its gold documents resolved
  against the workspace, rows naming no known document listed with the reason; the example file; the set's hash.
* probes.py: a probe set made from the workspace (multi-hop from two documents sharing an entity, single-hop from
  a statement), from templates or worded by a model backend, deterministic for a seed.
* records.py: the `Evaluation` rows (what was measured) and their per-question `EvaluationResult` rows.
* job.py: the "evaluate" job (core/worker.py runs it through the runner: progress, Stop, resume).
* metrics.py: recall@k, MRR, answer-in-context, latency p50/p95 per strategy, with seeded bootstrap intervals.
* compare.py: two evaluations of one question set (two builds, or two workspaces: questions paired by text):
  per-strategy change with a paired bootstrap interval, per question wins and losses.
* across.py: the evaluations a Compare may pair, from the workspaces the user may read.
* leads.py: the best strategy per figure and whether its lead over the runner-up and over dense is significant
  (a paired interval that holds 0 is not); the best few a question view opens.
* export.py: a run as CSV and JSON.
* inspect.py: one question opened: every strategy's retrieval made again, the gold nodes to highlight.

A question is a plain dict (the page edits a list of them before running): "id", "question", "answer" (or None),
"gold": [{"key": what the file named, "docs": [document ids it resolves to]}], "generated" (True for probes).
"""
