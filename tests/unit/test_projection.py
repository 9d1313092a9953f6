"""bench/projection.py: a stage's growth read as a power of the corpus size, and extrapolated from it."""

from __future__ import annotations

import math

from bench.projection import fit, project


def test_a_power_law_is_recovered_and_extrapolated():
    a, b = fit([1e6, 2e6, 4e6], [100.0, 200.0 * 2 ** 0.2, 400.0 * 4 ** 0.2])  # grows as tokens^1.2
    assert math.isclose(b, 1.2, abs_tol=1e-9) and math.isclose(a * 1e6 ** b, 100.0, rel_tol=1e-9)


def test_a_projection_per_stage_and_for_the_build():
    def build(tokens: int, k: float) -> dict:
        return {"corpus": {"tokens": tokens}, "wall_s": 30.0 * k, "peak_rss_mib": 1000.0 * k ** 0.5,
                "stages_s": {"extract": 10.0 * k, "layers": 20.0 * k * k}, "stages_cpu_s": {"extract": 18.0 * k},
                "stages_peak_rss_mib": {"extract": 500.0, "layers": 900.0 * k}}

    p = project([build(1_000_000, 1.0), build(2_000_000, 2.0)], 10_000_000)
    assert p["stages"]["extract"]["wall_s"]["exponent"] == 1.0 and p["stages"]["layers"]["wall_s"]["exponent"] == 2.0
    assert math.isclose(p["stages"]["extract"]["wall_s"]["projected"], 100.0)
    assert math.isclose(p["stages"]["layers"]["wall_s"]["projected"], 2000.0)
    assert p["stages"]["extract"]["peak_mib"]["exponent"] == 0.0  # flat memory stays flat
    assert p["stages"]["layers"]["cpu_s"]["exponent"] == 0.0  # a figure not measured is not extrapolated
    assert math.isclose(p["peak_mib"]["projected"], 1000.0 * 10 ** 0.5, rel_tol=1e-3)
