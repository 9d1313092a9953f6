"""The held-out multi-hop retrieval set `elements`, generated with gold by construction from the chemical elements'
data that the PyPI package `mendeleev` (version 1.3.0, MIT) ships as its SQLite file `elements.db`:

    pip install --no-deps mendeleev==1.3.0     # the only thing this needs (`make bench` installs it)
    python -m bench.heldout_set --out bench/data/elements

HELD OUT: this set is measured once per change and NOTHING is ever chosen on it (no constant, source order,
threshold, template or ablation): a figure read on it reports, it never decides. A change that is tuned until this
set looks better makes it one more development set, as happened to the factbook set (docs/BENCHMARKS.md).

Nothing is downloaded here and mendeleev is never imported (only its data file is read, with sqlite3, so its
dependencies are not needed): the module reads the installed package's `elements.db` (or `--db FILE`) and writes
`corpus.jsonl` and `queries.jsonl` in the format of ../shared/eval/README.md. The source is none of the other sets'
(Wikipedia for HotpotQA and 2WikiMultihopQA, news for MultiHop-RAG, the CIA World Factbook for factbook): the
elements' descriptions, uses, sources and name origins as mendeleev publishes them, and its isotope table.

Corpus. Per element, up to four passages titled with the element's name (so titles repeat, as in MuSiQue-style sets:
gold ids name the passage): overview (mendeleev's description, with its period, group, block and series), history
(discoverers, place and year of discovery, origin of the name), uses (uses and sources) and properties (atomic
weight, density, melting and boiling points, crustal abundance, top producers). Per element, also one passage per
isotope, titled "<Element>-<mass number>": every stable isotope and the RADIOACTIVE_PER_ELEMENT longest-lived
radioactive ones; a passage says when its isotope is the element's most abundant or (for an element with no stable
isotope) its longest-lived. Every passage that is not gold for a question is a distractor for it.

Questions (templated from the structured fields; each answer is in the second passage, never in the first):

* bridge: the question identifies an element A without naming it, by its discoverers and year (history passage) or,
  when that is absent or ambiguous, by the origin of its name; the answer is a fact in another passage of A: its
  density or melting point (properties), the natural abundance of its most abundant isotope, or the half-life of
  its longest-lived isotope (isotope passages, titled "<A>-<n>").
* comparison: two elements next to each other in the periodic table (melting point; year of discovery), or two
  isotopes of one element (half-life); the answer is the one with the larger (or earlier) value.

A question is dropped when its clue names the element or is shared by two elements, when the answer already
occurs in the first-hop passage, or when two values tie (within 5 %). Each query records `supporting_facts`:
[gold id, text the passage contains] for each gold passage, checked against the written passage. Selection is
deterministic: candidates are ordered by the SHA-1 of their id, at most MAX_PER_ELEMENT bridge questions name
one element, and at most QUOTA of each template are kept.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import sqlite3
from pathlib import Path

from bench.fourth_set import write  # the same corpus.jsonl / queries.jsonl writer

NAME = "elements"
PACKAGE = "mendeleev==1.3.0"
RADIOACTIVE_PER_ELEMENT = 6
QUOTA = {"density": 35, "melting": 25, "abundant": 30, "longest": 30, "cmp-melting": 35, "cmp-year": 30,
         "cmp-halflife": 30}
MAX_PER_ELEMENT = 2
YEAR_S = 365.25 * 86400
UNITS: dict[str, tuple[float, str]] = {  # mendeleev's half-life unit -> (seconds, words)
    "ysec": (1e-24, "yoctoseconds"), "zsec": (1e-21, "zeptoseconds"), "asec": (1e-18, "attoseconds"),
    "psec": (1e-12, "picoseconds"), "nsec": (1e-9, "nanoseconds"), "usec": (1e-6, "microseconds"),
    "msec": (1e-3, "milliseconds"), "sec": (1.0, "seconds"), "minute": (60.0, "minutes"), "hour": (3600.0, "hours"),
    "day": (86400.0, "days"), "year": (YEAR_S, "years"), "kyear": (1e3 * YEAR_S, "thousand years"),
    "Myear": (1e6 * YEAR_S, "million years"), "Gyear": (1e9 * YEAR_S, "billion years"),
    "Tyear": (1e12 * YEAR_S, "trillion years"), "Pyear": (1e15 * YEAR_S, "quadrillion years"),
    "Eyear": (1e18 * YEAR_S, "quintillion years"), "Zyear": (1e21 * YEAR_S, "sextillion years"),
    "Yyear": (1e24 * YEAR_S, "septillion years")}
ELEMENT_FIELDS = ("atomic_number", "name", "symbol", "description", "sources", "uses", "discoverers",
                  "discovery_location", "discovery_year", "name_origin", "atomic_weight", "density", "period",
                  "group_id", "block", "abundance_crust", "top_3_producers")
ISOTOPE_FIELDS = ("atomic_number", "mass_number", "mass", "abundance", "is_radioactive", "half_life",
                  "half_life_unit", "spin", "parity", "discovery_year")


def package_db() -> Path:
    """The `elements.db` of the installed mendeleev package (found without importing it)."""
    spec = importlib.util.find_spec("mendeleev")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"mendeleev is not installed: pip install --no-deps {PACKAGE}")
    return Path(list(spec.submodule_search_locations)[0]) / "elements.db"


def load(db: Path) -> tuple[list[dict], list[dict]]:
    """(elements, isotopes) rows of mendeleev's database; an element row also has "melting_point" and
    "boiling_point" (K) of its first phase-transition row."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        con.row_factory = sqlite3.Row
        elements = [dict(r) for r in con.execute(f"SELECT {', '.join(ELEMENT_FIELDS)} FROM elements "
                                                 "ORDER BY atomic_number")]
        phase: dict[int, tuple] = {}
        for r in con.execute("SELECT atomic_number, melting_point, boiling_point FROM phasetransitions ORDER BY id"):
            phase.setdefault(r[0], (r[1], r[2]))
        for e in elements:
            e["melting_point"], e["boiling_point"] = phase.get(e["atomic_number"], (None, None))
        isotopes = [dict(r) for r in con.execute(f"SELECT {', '.join(ISOTOPE_FIELDS)} FROM isotopes "
                                                 "ORDER BY atomic_number, mass_number")]
    finally:
        con.close()
    return elements, isotopes


def _key(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def num(v: float) -> str:
    return f"{v:g}"


def clean(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def half_life(iso: dict) -> tuple[float, str] | None:
    """(seconds, "<value> <unit words>") of a radioactive isotope with a known half-life."""
    if not iso["is_radioactive"] or iso["half_life"] is None or iso["half_life_unit"] not in UNITS:
        return None
    secs, words = UNITS[iso["half_life_unit"]]
    return iso["half_life"] * secs, f"{num(iso['half_life'])} {words}"


def chosen_isotopes(isotopes: list[dict]) -> dict[int, list[dict]]:
    """Per atomic number, its stable isotopes and its RADIOACTIVE_PER_ELEMENT longest-lived radioactive ones,
    each with "role": "most abundant", "longest-lived" or ""."""
    by_z: dict[int, list[dict]] = {}
    for iso in isotopes:
        by_z.setdefault(iso["atomic_number"], []).append(iso)
    out: dict[int, list[dict]] = {}
    for z, isos in by_z.items():
        stable = [i for i in isos if not i["is_radioactive"]]
        timed = sorted((i for i in isos if half_life(i)), key=lambda i: -half_life(i)[0])  # type: ignore[index]
        keep = stable + timed[:RADIOACTIVE_PER_ELEMENT]
        for i in keep:
            i["role"] = ""
        ab = sorted((i for i in isos if i["abundance"]), key=lambda i: -i["abundance"])
        if ab and (len(ab) == 1 or ab[0]["abundance"] > ab[1]["abundance"]) and ab[0] in keep:
            ab[0]["role"] = "most abundant"
        if not stable and timed and (len(timed) == 1 or half_life(timed[0])[0] > half_life(timed[1])[0]):  # type: ignore[index]
            timed[0]["role"] = "longest-lived"
        out[z] = sorted(keep, key=lambda i: i["mass_number"])
    return out


def discovery(e: dict) -> str:
    """The history clue "discovered by <who> in <year>", or "" when the data has none."""
    who = clean(e["discoverers"])
    if not who or not e["discovery_year"] or "ancient" in who.lower():
        return ""
    return f"discovered by {who} in {e['discovery_year']}"


def origin(e: dict) -> str:
    return clean(e["name_origin"]).rstrip(".")


def origin_clue(e: dict) -> str:
    """The name clue "whose name comes from <origin>" ("that was named for ..." when the origin says so)."""
    o = origin(e)
    if not o:
        return ""
    return f"that was n{o[1:]}" if o.lower().startswith("named ") else f"whose name comes from {o}"


def element_passages(e: dict) -> dict[str, str]:
    """{"overview"|"history"|"uses"|"properties": text} of an element row; a passage with no data is left out."""
    name, out = e["name"], {}
    place = f"period {e['period']}" + (f", group {e['group_id']}" if e["group_id"] else "") + (
        f", in the {e['block']}-block" if e["block"] else "")
    if e["description"]:
        out["overview"] = f"{clean(e['description'])} {name} (symbol {e['symbol']}, atomic number " \
                          f"{e['atomic_number']}) is in {place} of the periodic table."
    hist = []
    who = clean(e["discoverers"])
    if who:
        hist.append(who if "ancient" in who.lower() else f"{name} was discovered by {who}" + (
            f" in {clean(e['discovery_location'])}" if e["discovery_location"] else "") + (
            f" in {e['discovery_year']}" if e["discovery_year"] else "") + ".")
    if e["name_origin"]:
        hist.append(f"Origin of the name: {origin(e)}.")
    if hist:
        out["history"] = " ".join(hist)
    uses = " ".join(x for x in (f"Uses: {clean(e['uses'])}" if e["uses"] else "",
                                f"Sources: {clean(e['sources'])}" if e["sources"] else "") if x)
    if uses:
        out["uses"] = uses
    props = [f"{name} has a standard atomic weight of {num(e['atomic_weight'])}." if e["atomic_weight"] else "",
             f"Its density is {num(e['density'])} g/cm³." if e["density"] else "",
             f"It melts at {num(e['melting_point'])} K." if e["melting_point"] else "",
             f"It boils at {num(e['boiling_point'])} K." if e["boiling_point"] else "",
             f"Its abundance in the Earth's crust is {num(e['abundance_crust'])} mg/kg." if e["abundance_crust"] else "",
             f"Top producers: {clean(e['top_3_producers'])}." if e["top_3_producers"] else ""]
    if any(props):
        out["properties"] = " ".join(p for p in props if p)
    return out


def isotope_passage(e: dict, iso: dict) -> tuple[str, str]:
    """(title, text) of an isotope's passage."""
    name, a, z = e["name"], iso["mass_number"], iso["atomic_number"]
    title = f"{name}-{a}"
    parts = [f"{title} is an isotope of {name.lower()} with {z} proton{'s' * (z != 1)} and {a - z} neutron{'s' * (a - z != 1)} (mass number {a})"
             + (f"; its atomic mass is {iso['mass']:.6f} u." if iso["mass"] else ".")]
    hl = half_life(iso)
    if not iso["is_radioactive"]:
        parts.append("It is stable.")
    elif hl:
        parts.append(f"It is radioactive, with a half-life of {hl[1]}.")
    if iso["abundance"]:
        parts.append(f"It makes up {num(iso['abundance'])} % of natural {name.lower()}.")
    if iso["role"]:
        parts.append(f"It is the {iso['role']} isotope of {name.lower()}.")
    if iso["spin"]:
        parts.append(f"Nuclear spin {iso['spin']}{iso['parity'] or ''}.")
    if iso["discovery_year"]:
        parts.append(f"It was first identified in {iso['discovery_year']}.")
    return title, " ".join(parts)


BRIDGES = {  # template -> (question, where the answer is)
    "density": "What is the density of the element {clue}?",
    "melting": "At what temperature does the element {clue} melt?",
    "abundant": "What share of the natural element {clue} is its most abundant isotope?",
    "longest": "What is the half-life of the longest-lived isotope of the element {clue}?",
}


def build(elements: list[dict], isotopes: list[dict]) -> tuple[list[dict], list[dict]]:
    """(corpus rows, query rows) of mendeleev's element and isotope rows (`load`); deterministic."""
    corpus: list[dict] = []
    where: dict[tuple[int, str], int] = {}
    by_z = {e["atomic_number"]: e for e in elements}
    isos = chosen_isotopes(isotopes)
    for e in elements:
        z = e["atomic_number"]
        for label, text in element_passages(e).items():
            where[z, label] = len(corpus)
            corpus.append({"id": len(corpus), "title": e["name"], "text": text})
        for iso in isos.get(z, []):
            title, text = isotope_passage(e, iso)
            where[z, f"iso-{iso['mass_number']}"] = len(corpus)
            corpus.append({"id": len(corpus), "title": title, "text": text})
    clue_of: dict[int, tuple[str, str]] = {}  # z -> (clue phrase, the text of it in the history passage)
    counts: dict[str, int] = {}
    for e in elements:
        for c in (discovery(e), origin_clue(e)):
            counts[c] = counts.get(c, 0) + 1
    for e in elements:
        for c, fact in ((discovery(e), clean(e["discoverers"])), (origin_clue(e), origin(e))):
            if c and counts.get(c) == 1 and norm(e["name"]) not in norm(c) and (e["atomic_number"], "history") in where:
                clue_of[e["atomic_number"]] = (c, fact)
                break
    def elsewhere(fact: str, hop1: int) -> bool:  # a passage other than the first hop holds the clue's text
        return any(fact in p["text"] for p in corpus if p["id"] != hop1)

    candidates: dict[str, list[tuple[int, dict]]] = {t: [] for t in QUOTA}
    for z, (clue, fact) in clue_of.items():
        e, hop1 = by_z[z], where[z, "history"]
        answers: dict[str, tuple[str, int]] = {}
        if e["density"] and (z, "properties") in where:
            answers["density"] = (f"{num(e['density'])} g/cm³", where[z, "properties"])
        if e["melting_point"] and (z, "properties") in where:
            answers["melting"] = (f"{num(e['melting_point'])} K", where[z, "properties"])
        for iso in isos.get(z, []):
            if iso["role"] == "most abundant":
                answers["abundant"] = (f"{num(iso['abundance'])} %", where[z, f"iso-{iso['mass_number']}"])
            if iso["role"] == "longest-lived":
                answers["longest"] = (half_life(iso)[1], where[z, f"iso-{iso['mass_number']}"])  # type: ignore[index]
        for tpl, (answer, hop2) in answers.items():
            q = BRIDGES[tpl].format(clue=clue)
            if answer in corpus[hop1]["text"] or norm(e["name"]) in norm(q) or elsewhere(fact, hop1):
                continue
            candidates[tpl].append((z, {
                "id": f"el-{tpl}-{e['symbol']}", "question": q, "answer": answer, "answer_aliases": [],
                "type": "bridge", "gold_ids": [hop1, hop2], "supporting_facts": [[hop1, fact], [hop2, answer]]}))
    neighbours = sorted({(a["atomic_number"], b["atomic_number"]) for a in elements for b in elements
                         if a["atomic_number"] < b["atomic_number"] and (
                             b["atomic_number"] == a["atomic_number"] + 1
                             or (a["group_id"] and a["group_id"] == b["group_id"] and b["period"] == a["period"] + 1))})
    for a, b in neighbours:
        ea, eb = by_z[a], by_z[b]
        ma, mb = ea["melting_point"], eb["melting_point"]
        if ma and mb and max(ma, mb) >= 1.05 * min(ma, mb) and (a, "properties") in where and (b, "properties") in where:
            first, second = (ea, eb) if _key("m", ea["name"], eb["name"]) < _key("m", eb["name"], ea["name"]) else (eb, ea)
            win = ea if ma > mb else eb
            candidates["cmp-melting"].append((0, {
                "id": f"el-cmp-melting-{first['symbol']}-{second['symbol']}",
                "question": f"Which has the higher melting point, {first['name']} or {second['name']}?",
                "answer": win["name"], "answer_aliases": [], "type": "comparison",
                "gold_ids": [where[first["atomic_number"], "properties"], where[second["atomic_number"], "properties"]],
                "supporting_facts": [[where[a, "properties"], f"{num(ma)} K"], [where[b, "properties"], f"{num(mb)} K"]]}))
        ya, yb = (discovery(x) and x["discovery_year"] for x in (ea, eb))
        if ya and yb and ya != yb and (a, "history") in where and (b, "history") in where:
            first, second = (ea, eb) if _key("y", ea["name"], eb["name"]) < _key("y", eb["name"], ea["name"]) else (eb, ea)
            win = ea if ya < yb else eb
            candidates["cmp-year"].append((0, {
                "id": f"el-cmp-year-{first['symbol']}-{second['symbol']}",
                "question": f"Which was discovered earlier, {first['name']} or {second['name']}?",
                "answer": win["name"], "answer_aliases": [], "type": "comparison",
                "gold_ids": [where[first["atomic_number"], "history"], where[second["atomic_number"], "history"]],
                "supporting_facts": [[where[a, "history"], str(ya)], [where[b, "history"], str(yb)]]}))
    for z, chosen in isos.items():
        timed = [i for i in chosen if half_life(i)]
        if z not in by_z or len(timed) < 2:
            continue
        i, j = sorted(timed, key=lambda x: _key("h", str(z), str(x["mass_number"])))[:2]
        hi, hj = half_life(i), half_life(j)
        if hi is None or hj is None or max(hi[0], hj[0]) < 1.05 * min(hi[0], hj[0]):
            continue
        name = by_z[z]["name"]
        win = i if hi[0] > hj[0] else j
        candidates["cmp-halflife"].append((0, {
            "id": f"el-cmp-halflife-{by_z[z]['symbol']}{i['mass_number']}-{j['mass_number']}",
            "question": f"Which has the longer half-life, {name}-{i['mass_number']} or {name}-{j['mass_number']}?",
            "answer": f"{name}-{win['mass_number']}", "answer_aliases": [], "type": "comparison",
            "gold_ids": [where[z, f"iso-{i['mass_number']}"], where[z, f"iso-{j['mass_number']}"]],
            "supporting_facts": [[where[z, f"iso-{i['mass_number']}"], hi[1]],
                                 [where[z, f"iso-{j['mass_number']}"], hj[1]]]}))
    queries: list[dict] = []
    per: dict[int, int] = {}
    for tpl, cands in candidates.items():
        kept = 0
        for z, q in sorted(cands, key=lambda c: _key(c[1]["id"])):
            if kept >= QUOTA[tpl] or (z and per.get(z, 0) >= MAX_PER_ELEMENT):
                continue
            if not all(fact in corpus[i]["text"] for i, fact in q["supporting_facts"]):
                continue
            if z:
                per[z] = per.get(z, 0) + 1
            kept += 1
            q["gold_titles"] = [corpus[i]["title"] for i in q["gold_ids"]]
            queries.append(q)
    return corpus, [{k: q[k] for k in ("id", "question", "answer", "answer_aliases", "type", "gold_titles",
                                       "gold_ids", "supporting_facts")} for q in queries]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=f"bench/data/{NAME}")
    ap.add_argument("--db", help="mendeleev's elements.db (default: the installed package's)")
    args = ap.parse_args()
    corpus, queries = build(*load(Path(args.db) if args.db else package_db()))
    write(corpus, queries, Path(args.out))
    kinds = {t: sum(q["id"].startswith(f"el-{t}-") for q in queries) for t in QUOTA}
    print(f"wrote {len(corpus)} passages and {len(queries)} queries to {args.out} ({kinds})")


if __name__ == "__main__":
    main()
