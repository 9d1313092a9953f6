"""The evaluation engine benchmark's own arithmetic (bench/evaluate.py): the recall check against `core eval`, the
RSS by questions measured, the loading time, and the section it renders."""

from __future__ import annotations

from bench.evaluate import loading_s, measure_start_mib, recall_differences, report, rss_by_questions

MIB = 2**20


def fig(value: float) -> dict:
    return {"value": value, "low": value - 0.1, "high": value + 0.1, "n": 200}


def figures(r2: float, r5: float, r10: float) -> dict:
    return {"recall@2": fig(r2), "recall@5": fig(r5), "recall@10": fig(r10)}


def test_recall_differences_lists_what_differs_and_what_one_side_lacks():
    ours = {"naive": figures(0.585, 0.7975, 0.8775), "bm25": figures(0.5375, 0.74, 0.9275),
            "hirag": figures(0.5, 0.6, 0.7)}
    theirs = {"naive": {"recall@2": 0.585, "recall@5": 0.7975, "recall@10": 0.8775},
              "bm25": {"recall@2": 0.5375, "recall@5": 0.745, "recall@10": 0.9275},
              "noderag": {"recall@2": 0.6, "recall@5": 0.8, "recall@10": 0.9}}
    assert recall_differences(ours, theirs) == [
        {"strategy": "bm25", "k": 5, "evaluate": 0.74, "eval": 0.745},
        {"strategy": "hirag", "only_in": "evaluate"},
        {"strategy": "noderag", "only_in": "eval"},
    ]
    assert recall_differences({"naive": ours["naive"]}, {"naive": theirs["naive"]}) == []
    # the same mean rounded differently is no difference (figures keep 4 places, so does core eval)
    assert recall_differences({"x": figures(0.12345, 0.5, 0.5)}, {"x": {"recall@2": 0.1235, "recall@5": 0.5,
                                                                        "recall@10": 0.5}}) == []


TIMELINE = [(0.0, "", 0, 100 * MIB), (0.5, "measure", 0, 200 * MIB), (3.0, "measure", 0, 900 * MIB),
            (3.4, "measure", 1, 950 * MIB), (4.0, "measure", 3, 960 * MIB), (4.1, "measure", 3, 970 * MIB),
            (5.0, "measure", 5, 1000 * MIB), (5.5, "figures", 0, 1200 * MIB)]


def test_rss_by_questions_takes_the_largest_sample_at_or_below_each_count():
    assert rss_by_questions(TIMELINE, 5, every=2) == {"0": 900.0, "2": 950.0, "4": 970.0, "5": 1000.0}
    assert rss_by_questions([(0.0, "figures", 0, MIB)], 5) == {}


def test_loading_time_runs_from_the_measure_step_to_its_first_question():
    assert loading_s(TIMELINE) == 2.9
    assert loading_s(TIMELINE[:3]) is None
    assert measure_start_mib(TIMELINE) == 200.0 and measure_start_mib(TIMELINE[:1]) is None


def test_the_section_names_the_command_totals_and_every_strategy():
    row = figures(0.5, 0.6, 0.7) | {"mrr": fig(0.55), "latency_ms_p50": fig(12.0), "latency_ms_p95": fig(30.0),
                                    "questions": 200, "baseline": None, "total_s": 2.4}
    r = {"set": "hotpotqa", "questions": 200, "command": "python -m bench.evaluate --set hotpotqa",
         "evaluate_command": "python -m core evaluate --workspace hotpotqa", "machine": "2 cores",
         "load_average": [0.5, 1.75], "date": "2026-11-27",
         "commit": "abc", "wall_s": 61.0, "steps_s": {"measure": 50.0, "figures": 1.5}, "loading_s": 6.2,
         "peak_rss_mib": 1500, "ru_maxrss_mib": 1490, "polled_peak_rss_mib": 1500,
         "rss_mib_at_measure_start": 850.0, "rss_mib_by_questions": {"0": 900.0, "200": 1400.0}, "result_rows": 400, "result_json_bytes": 40960,
         "evaluation_json_bytes": 2048, "database_growth_bytes": 2**20,
         "strategies": {"hirag": row, "naive": row | {"baseline": "dense"}},
         "check": {"command": "python -m core eval", "wall_s": 40.0,
                   "differences": [{"strategy": "hirag", "k": 2, "evaluate": 0.5, "eval": 0.505}],
                   "latency_ms_p50": {"hirag": 11.0, "naive": 5.0}, "latency_ms_p95": {"hirag": 29.0, "naive": 6.0}}}
    text = "\n".join(report(r))
    assert "## Evaluation engine: 200 questions × 2 strategies on `hotpotqa`" in text
    assert "**61.0 s**" in text and "step `measure` 50.0 s" in text and "`figures` 1.5 s" in text
    assert "* machine: 2 cores; 1-minute load average 0.5 before the evaluation, 1.75 after" in text
    assert "**1,500 MiB**" in text and "start: 850; by questions" in text and "0: 900, 200: 1,400" in text and "400 EvaluationResult rows" in text
    assert "**1 differences**: hirag R@2 0.5 against 0.505" in text
    assert "| hirag | 0.500 [0.400, 0.600] | 0.600 [0.500, 0.700] | 0.700 [0.600, 0.800] | 0.550 [0.450, 0.650] | " \
           "12.0 [11.9, 12.1] | 30.0 [29.9, 30.1] | 2.4 | 11.0 / 29.0 |" in text
    assert "| naive (dense) |" in text and "retrieval section" not in text
    r["stored_eval"] = {"file": "bench/results/eval-hotpotqa.json", "date": "2026-11-26",
                        "differences": [{"strategy": "hirag", "k": 2, "evaluate": 0.5, "eval": 0.6},
                                        {"strategy": "hirag", "k": 5, "evaluate": 0.6, "eval": 0.7},
                                        {"strategy": "noderag", "only_in": "eval"}]}
    assert "(the retrieval section, 2026-11-26): recall@k differs for hirag, noderag: " in "\n".join(report(r))
    del r["check"]
    text = "\n".join(report(r))
    assert "* check:" not in text and "`core eval` p50" not in text and "| 2.4 |" in text
