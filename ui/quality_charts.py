"""The Quality page's four plots of one level, in Vega-Lite (Streamlit's Altair charts): the metrics against their
reference lines, community sizes, conductance against coherence, and modularity and coverage per level.

Vega-Lite rather than plotly: plotly's script is 4.7 MB, which the browser loads, parses and then draws four charts
with before the page has its first plot (3.9 s on the 240-paragraph workspace, against about 0.4 s for Vega's).
Text from documents (community titles) reaches these charts only as data values, which Vega draws as text, never as
HTML."""

from __future__ import annotations

import math

from core.quality.metrics import LevelMetrics
from core.quality.readings import GOOD, NONE, POOR, Reference
from core.text import truncate

COLOURS = {GOOD: "#2e7d32", POOR: "#c62828", NONE: "#757575"}  # the lines (dark)
BARS = {GOOD: "#a5d6a7", POOR: "#ef9a9a", NONE: "#e0e0e0", "fair": "#ffe082"}  # the values (light, a line shows)
BULLETS = ["modularity", "coverage", "conductance_mean", "coherence_mean", "singleton_share", "tiny_share",
           "calinski_harabasz", "cluster_sparsity"]
HEIGHT = 300


def fmt_value(value, fmt: str) -> str:
    """`value` in `fmt`, or a dash when it is missing or not a number."""
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def _span(ref: Reference, value: float) -> tuple[float, float]:
    """The x range of a metric's bullet: [0, 1] for the shares and indices, wider when the value or a line is."""
    marks = [x for x in (value, ref.good, ref.poor) if x is not None and math.isfinite(x)]
    if ref.key == "calinski_harabasz":
        return 0.0, max([2.0] + [1.25 * x for x in marks])
    return min([0.0] + marks), max([1.0] + marks)


def bullet_rows(m: LevelMetrics, refs: dict[str, Reference]) -> tuple[list[dict], list[dict]]:
    """One bar per metric (its value as a share of the metric's own range, so every row fills the same width) and
    one mark per reference line: (bars, lines). Each row keeps the real value for its label and tooltip."""
    bars, lines = [], []
    for key in (k for k in BULLETS if k in refs):
        ref, value = refs[key], m.figures.get(key, math.nan)
        value = value if value is not None and math.isfinite(value) else math.nan
        verdict = ref.verdict(value)
        lo, hi = _span(ref, value)
        at = 0.0 if value != value else (value - lo) / (hi - lo)
        bars.append({"metric": ref.label, "at": at, "colour": BARS.get(verdict, BARS["fair"]),
                     "text": f"{fmt_value(value, '{:.3g}')} · {verdict}", "value": fmt_value(value, "{:.3f}"),
                     "verdict": verdict, "source": truncate(ref.source, 160)})
        for x, what in ((ref.good, GOOD), (ref.poor, POOR)):
            if x is not None and (what == GOOD or x != ref.good):
                lines.append({"metric": ref.label, "at": (x - lo) / (hi - lo), "colour": COLOURS[what], "what": what,
                              "text": f"{what} {x:g}" if x == round(x, 2) else f"{what} {x:.2f}"})
    return bars, lines


def references_chart(m: LevelMetrics, refs: dict[str, Reference]):
    """Each metric's value as a bar coloured by its verdict, with its good (green) and poor (red) lines."""
    import altair as alt
    import pandas as pd

    bars, lines = bullet_rows(m, refs)
    order = [b["metric"] for b in bars]
    x = alt.X("at:Q", scale=alt.Scale(domain=[0, 1]), axis=None)
    y = alt.Y("metric:N", sort=order, title=None, axis=alt.Axis(labelLimit=140))
    base = alt.Chart(pd.DataFrame(bars))
    bar = base.mark_bar(height=16).encode(x=x, y=y, color=alt.Color("colour:N", scale=None), tooltip=[
        alt.Tooltip("metric:N"), alt.Tooltip("value:N"), alt.Tooltip("verdict:N"), alt.Tooltip("source:N")])
    label = base.mark_text(align="left", dx=4, fontSize=11, color="#212121").encode(x=x, y=y, text="text:N")
    chart = bar + label
    if lines:
        tick_base = alt.Chart(pd.DataFrame(lines))
        ticks = tick_base.mark_tick(thickness=2, size=22).encode(x=x, y=y, color=alt.Color("colour:N", scale=None),
                                                                tooltip=["metric:N", "text:N"])
        good = tick_base.transform_filter(alt.datum.what == GOOD)  # good's label above the bar, poor's below:
        poor = tick_base.transform_filter(alt.datum.what == POOR)  # the two never overlap when the lines are close
        notes = [part.mark_text(dy=dy, fontSize=9).encode(x=x, y=y, text="text:N", color=alt.Color("colour:N",
                                                                                               scale=None))
                 for part, dy in ((good, -14), (poor, 14))]
        chart = alt.layer(chart, ticks, *notes)
    return chart.properties(height=52 * len(bars), title="Against references (ticks: green good, red poor)")


def sizes_chart(m: LevelMetrics, tiny: int):
    """The histogram of community sizes (log count when there are many), with the tiny-size line."""
    import altair as alt
    import pandas as pd

    bins = min(60, max(5, len(set(m.hist))))
    scale = alt.Scale(type="symlog") if len(m.hist) > 50 else alt.Scale()
    hist = alt.Chart(pd.DataFrame({"members": m.hist})).mark_bar(color="#4c78a8").encode(
        x=alt.X("members:Q", bin=alt.Bin(maxbins=bins), title="members"),
        y=alt.Y("count():Q", scale=scale, title="communities"), tooltip=[alt.Tooltip("count():Q", title="communities")])
    line = alt.Chart(pd.DataFrame({"x": [tiny + 0.5], "text": [f"tiny: ≤ {tiny}"]}))
    rule = line.mark_rule(color=COLOURS[POOR], strokeDash=[4, 3]).encode(x="x:Q")
    note = line.mark_text(align="left", dx=4, dy=-6, fontSize=9, color=COLOURS[POOR]).encode(
        x="x:Q", y=alt.value(8), text="text:N")
    return (hist + rule + note).properties(height=HEIGHT, title="Community sizes")


def scatter_chart(m: LevelMetrics, weak: float):
    """Each community's conductance against its coherence, coloured by badness, with the weakly-connected line."""
    import altair as alt
    import pandas as pd

    t = m.table
    pts = [i for i, (c, h) in enumerate(zip(t["conductance"], t["coherence"])) if c == c and h == h]
    df = pd.DataFrame({"conductance": [t["conductance"][i] for i in pts], "coherence": [t["coherence"][i] for i in pts],
                       "badness": [t["badness"][i] for i in pts], "members": [t["size"][i] for i in pts],
                       "community": [truncate(t["title"][i] or t["id"][i], 80) for i in pts]})
    dots = alt.Chart(df).mark_circle(size=45, opacity=0.85).encode(
        x=alt.X("conductance:Q", title="conductance (lower is better)"), y=alt.Y("coherence:Q", title="coherence"),
        color=alt.Color("badness:Q", scale=alt.Scale(scheme="redyellowgreen", reverse=True, domain=[0, 1])),
        tooltip=["community:N", "members:Q", alt.Tooltip("conductance:Q", format=".2f"),
                 alt.Tooltip("coherence:Q", format=".2f"), alt.Tooltip("badness:Q", format=".2f")])
    line = alt.Chart(pd.DataFrame({"x": [weak], "text": ["weakly connected"]}))
    rule = line.mark_rule(color=COLOURS[POOR], strokeDash=[4, 3]).encode(x="x:Q")
    note = line.mark_text(align="left", dx=4, fontSize=9, color=COLOURS[POOR]).encode(x="x:Q", y=alt.value(8),
                                                                                     text="text:N")
    return (dots + rule + note).properties(height=HEIGHT, title="Conductance vs coherence")


def levels_chart(per_level: list[LevelMetrics], refs: dict[str, Reference]):
    """Modularity and coverage per level, with modularity's good line (0.3) and coverage's half."""
    import altair as alt
    import pandas as pd

    rows = [{"level": x.level, "figure": name, "value": x.figures[name]}
            for x in per_level for name in ("modularity", "coverage")]
    lines = alt.Chart(pd.DataFrame(rows)).mark_line(point=True).encode(
        x=alt.X("level:O", title="level", axis=alt.Axis(labelAngle=0)), y=alt.Y("value:Q", title=None),
        color=alt.Color("figure:N", title=None, legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=["modularity", "coverage"], range=["#1f77b4", "#ff7f0e"])),
        tooltip=["figure:N", "level:O", alt.Tooltip("value:Q", format=".3f")])
    marks = pd.DataFrame([{"y": refs["modularity"].good, "text": "modularity 0.3: clear structure",
                           "colour": COLOURS[GOOD]},
                          {"y": refs["coverage"].good, "text": "coverage ½", "colour": "#9d9d9d"}])
    base = alt.Chart(marks)
    rule = base.mark_rule(strokeDash=[4, 3]).encode(y="y:Q", color=alt.Color("colour:N", scale=None))
    note = base.mark_text(align="left", x=4, dy=-6, fontSize=9).encode(y="y:Q", text="text:N",
                                                                      color=alt.Color("colour:N", scale=None))
    return (lines + rule + note).properties(height=HEIGHT, title="Per level")
