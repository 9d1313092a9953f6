"""A seeded generator of encyclopedia-like articles about a fictional world, for build benchmarks.

    python -m bench.gen_corpus --tokens 1000000 --seed 7 --out /tmp/strata-gen

writes DIR/corpus.jsonl (one {"id", "title", "text"} per line) and DIR/meta.json (tokens, documents, seed).

The world (bench/gen_world.py) holds people, organisations (universities, companies, bands, newspapers, museums),
places (cities, regions, rivers, countries), works (novels, albums, films, plays) and events (festivals, prizes,
battles, championships), tied together by facts: people are born in cities, study at universities, work for and found
organisations, write works and win prizes; organisations sit in cities; cities lie in regions on rivers. Every
entity's facts are fixed by the seed, so two articles that mention the same person agree about her, and
popularity follows a Zipf-like law: a few names recur across hundreds of articles, most occur once or twice, as in
a real encyclopedia. An article is about one entity (its title), its length drawn from a log-normal clipped to
150-1500 tokens, its sentences drawn from many templates with varied vocabulary, dates and numbers. Sizes are
measured in tokens of the bundled tokenizer (core/ingest/tokens.py). Nothing is copied from the eval sets.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

from bench.gen_world import FIELDS, JOBS, MONTHS, ORG_KINDS, SECTORS, World, make_world
from core.ingest.tokens import get_tokenizer

# -- sentences -----------------------------------------------------------------------------------------------------
_ACTIVITIES = ("study the old harbour records|survey the flood plain|attend a conference on {field}|open a new office|"
               "lecture on {field}|recover from an illness|negotiate a contract|record a live album|"
               "paint the river front|collect material for a new book|teach a summer course in {field}").split("|")
_PRAISE = ("meticulous|restless|generous|stubborn|visionary|difficult but fair|quietly brilliant|ambitious|"
           "unusually patient|fiercely independent|warm and witty").split("|")
_OPINIONS = ("praised its clear structure|called it uneven but bold|found the ending abrupt|admired its humour|"
             "compared it to the early work of {person}|criticised its length|described it as a turning point").split("|")
_CLIMATE = ["The climate is mild, with average summer temperatures near {t} degrees.",
            "Winters are wet, and the {river} floods about once every {n} years.",
            "Rainfall averages {mm} millimetres a year, most of it in autumn."]


def _date(rng: random.Random, year: int) -> str:
    """"on 12 March 1987", "in March 1987" or "in 1987"."""
    r = rng.random()
    if r < 0.35:
        return f"on {rng.randint(1, 28)} {rng.choice(MONTHS)} {year}"
    if r < 0.55:
        return f"in {rng.choice(MONTHS)} {year}"
    return f"in {year}"


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class Writer:
    """Sentences about one subject; `facts()` gives the subject's own facts, `filler()` one more sentence tying it
    to other (mostly popular) entities."""

    def __init__(self, w: World, rng: random.Random):
        self.w, self.rng = w, rng

    def n(self, kind: str, i: int | None = None, skew: float = 2.2) -> str:
        return self.w.name(kind, self.w.pick(kind, self.rng, skew) if i is None else i)

    def festival(self) -> int:
        """A popular event that is not a battle."""
        while True:
            j = self.w.pick("event", self.rng)
            if not self.w.name("event", j).startswith("Battle"):
                return j

    def generic(self, subject: str) -> list:
        """Sentences that fit any subject, tying it to other entities."""
        r, n = self.rng, self.n
        return [
            lambda: f"In {r.randint(1900, 2022)}, {subject} was the subject of an exhibition at the {n('org')}.",
            lambda: f"{n('person')}, {_a(r.choice(JOBS))} from {n('city')}, wrote about {subject} in {r.randint(1900, 2022)}.",
            lambda: f"Local histories of {n('city')} mention {subject} several times.",
            lambda: f"A documentary about {subject}, directed by {n('person')}, was shown at the {n('event', self.festival())}.",
            lambda: f"{subject} appears in a {r.randint(1950, 2022)} survey of {r.choice(FIELDS)} compiled by the {n('org')}.",
            lambda: f"The {n('org')} holds {r.randint(3, 4000):,} photographs and papers related to {subject}.",
            lambda: f"According to {n('person')}, {subject} shaped the study of {r.choice(FIELDS)} in {n('region')}.",
            lambda: (f"Records from {r.randint(1850, 2000)} show a payment of {r.randint(2, 500)},000 crowns from the "
                     f"{n('org')} connected with {subject}."),
        ]

    def q(self, j: int | None = None) -> str:
        return f"\"{self.n('work', j)}\""

    def fill(self, s: str) -> str:
        r = self.rng
        return s.format(field=r.choice(FIELDS), person=self.n("person"), t=r.randint(14, 31), n=r.randint(3, 40),
                        mm=r.randint(400, 2200), river=self.n("river"))

    # -- people
    def person(self, i: int) -> tuple[str, list[list[str]]]:
        r, f, rev = self.rng, self.w.facts["person"], self.w.facts["rev"]
        name, last = self.n("person", i), self.n("person", i).split()[-1]
        he = "She" if i % 2 else "He"
        his = "Her" if i % 2 else "His"
        y, died = f["year"][i], f["died"][i]
        born, uni, emp = self.n("city", f["born"][i]), self.n("org", f["uni"][i]), self.n("org", f["employer"][i])
        span = f"{y} – {died}" if died else f"born {y}"
        intro = [r.choice([f"{name} ({span}) was {_a(f['job'][i])} whose work in {f['field'][i]} shaped a generation.",
                           f"{name} ({span}) is {_a(f['job'][i])} and writer on {f['field'][i]}.",
                           f"{name} was {_a(f['job'][i])} from {born}, best known for work in {f['field'][i]}."])]
        early = [r.choice([f"{name} was born in {born} {_date(r, y)}.",
                           f"Born in {born} in {y}, {last} grew up near the "
                           f"{self.n('river', self.w.facts['city']['river'][f['born'][i]])}.",
                           f"{last} was born in {y} in {born}, the youngest of {r.randint(2, 7)} children."]),
                 r.choice([f"{his} father worked as a {r.choice(JOBS)} and {his.lower()} mother ran a small "
                           f"{r.choice(SECTORS)} business.",
                           f"{he} attended school in {self.n('city')} before moving to {born} at the age of {r.randint(8, 17)}."]),
                 r.choice([f"{last} studied {f['field'][i]} at the {uni}, graduating in {y + r.randint(20, 26)}.",
                           f"At the {uni}, {last} studied under {self.n('person')} and took a degree in {f['field'][i]}."])]
        career = [r.choice([f"In {y + r.randint(23, 35)}, {last} joined {emp} as a junior {f['job'][i]}.",
                            f"{last} spent {r.randint(3, 25)} years at {emp}, rising to head of its {f['field'][i]} department."])]
        for j in rev["founded"].get(i, [])[:3]:
            career.append(f"{last} founded {self.n('org', j)} in {self.w.facts['org']['year'][j]}"
                          + (f" together with {self.n('person')}." if r.random() < 0.4 else "."))
        for j in rev["works_of"].get(i, [])[:6]:
            wf = self.w.facts["work"]
            career.append(r.choice([f"{his} {wf['genre'][j]} {self.q(j)} appeared in {wf['year'][j]}.",
                                    f"{self.q(j)}, {_a(wf['genre'][j])} published by "
                                    f"{self.n('org', wf['publisher'][j])}, followed in {wf['year'][j]}.",
                                    f"In {wf['year'][j]} {last} completed {self.q(j)}, set in {self.n('city', wf['setting'][j])}."]))
        life = []
        if f["spouse"][i] >= 0 and f["spouse"][i] != i:
            life.append(f"{last} married {self.n('person', f['spouse'][i])} in {y + r.randint(22, 40)}.")
        for j in rev["won"].get(i, [])[:3]:
            life.append(f"{last} received the {self.n('event', j)} in {self.w.facts['event']['year'][j]}.")
        if died:
            life.append(r.choice([f"{name} died in {self.n('city')} {_date(r, died)}.",
                                  f"{last} died in {died} at the age of {died - y}."]))
        return name, [intro + early, career, life]

    def person_filler(self, i: int) -> list:
        r, last = self.rng, self.n("person", i).split()[-1]
        return [
            lambda: f"In {r.randint(1850, 2015)}, {last} travelled to {self.n('city')} to {self.fill(r.choice(_ACTIVITIES))}.",
            lambda: f"{self.n('person')} described {last} as {r.choice(_PRAISE)}.",
            lambda: f"{last}'s letters to {self.n('person')} are kept by the {self.n('org')}.",
            lambda: f"A biography of {last} by {self.n('person')} appeared in {r.randint(1900, 2020)}.",
            lambda: f"{last} collaborated with {self.n('person')} on {self.q()} and later on a study of {r.choice(FIELDS)}.",
            lambda: f"{last} served on the board of {self.n('org')} from {r.randint(1900, 1990)} to {r.randint(1991, 2020)}.",
            lambda: f"During the {self.n('event')}, {last} met {self.n('person')}, who became a lifelong friend.",
            lambda: f"{last} donated {r.randint(2, 900)} manuscripts to the {self.n('org')} in {r.randint(1900, 2020)}.",
            lambda: f"{last} spent the winter of {r.randint(1850, 2015)} in {self.n('city')}, writing about {r.choice(FIELDS)}.",
            lambda: f"In {r.randint(1880, 2020)}, {last} gave the annual lecture of the {self.n('org')} on {r.choice(FIELDS)}.",
            lambda: f"Students of {last} at the {self.n('org')} included {self.n('person')} and {self.n('person')}.",
            lambda: f"A portrait of {last} by {self.n('person')} hangs in the {self.n('org')}.",
            lambda: f"{last} disagreed publicly with {self.n('person')} over the early history of {self.n('city')}.",
            lambda: f"Between {r.randint(1850, 1950)} and {r.randint(1951, 2020)}, {last} lived mostly in {self.n('city')}.",
            lambda: f"{last} was elected a fellow of the {self.n('org')} in {r.randint(1880, 2020)}.",
        ]

    # -- organisations
    def org(self, i: int) -> tuple[str, list[list[str]]]:
        r, f, rev = self.rng, self.w.facts["org"], self.w.facts["rev"]
        name = self.n("org", i)
        city = self.n("city", f["city"][i])
        region = self.n("region", self.w.facts["city"]["region"][f["city"][i]])
        kind = next((k for cue, k in ORG_KINDS if cue in name), f"{f['sector'][i]} company")
        intro = [r.choice([f"The {name} is {_a(kind)} based in {city}, {region}.",
                           f"{name} is {_a(kind)} with its headquarters in {city}."]),
                 r.choice([f"It was founded in {f['year'][i]} by {self.n('person', f['founder'][i])}.",
                           f"{self.n('person', f['founder'][i])} established it {_date(r, f['year'][i])}."]),
                 f"It has released {r.randint(2, 14)} albums." if kind == "rock band" else
                 f"It has about {r.randint(40, 120)} musicians." if kind == "orchestra" else
                 f"It has about {f['staff'][i]:,} students." if "university" in kind else
                 f"It has about {f['staff'][i]:,} members." if kind in ("learned society", "football club") else
                 f"It employs about {f['staff'][i]:,} people."]
        history = [r.choice([f"In {f['year'][i] + r.randint(5, 60)}, the {name} moved to larger premises near the {self.n('river')}.",
                             f"The {name} acquired {self.n('org')} in {f['year'][i] + r.randint(5, 90)} for "
                             f"{r.randint(2, 900)} million crowns."])]
        alumni = [self.n("person", p) for p in rev["alumni"].get(i, [])[:6]]
        if alumni:
            history.append(f"Notable people associated with the {name} include {_join(alumni)}.")
        works = [j for j, pub in enumerate(self.w.facts["work"]["publisher"][:4000]) if pub == i][:4]
        for j in works:
            wf = self.w.facts["work"]
            history.append(f"The {name} published {self.q(j)} by {self.n('person', wf['author'][j])} in {wf['year'][j]}.")
        return name, [intro, history]

    def org_filler(self, i: int) -> list:
        r, name = self.rng, self.n("org", i)
        return [
            lambda: f"In {r.randint(1900, 2020)}, the {name} opened a branch in {self.n('city')}.",
            lambda: f"{self.n('person')} led the {name} from {r.randint(1900, 1980)} until {r.randint(1981, 2020)}.",
            lambda: f"The {name} sponsors the {self.n('event', self.festival())}.",
            lambda: f"Revenue reached {r.randint(2, 950)} million crowns in {r.randint(1990, 2022)}, up {r.randint(2, 40)} percent.",
            lambda: f"A strike at the {name} in {r.randint(1900, 2000)} lasted {r.randint(2, 30)} weeks.",
            lambda: f"The {name} works closely with the {self.n('org')} on {r.choice(FIELDS)}.",
            lambda: f"Its archive holds the papers of {self.n('person')} and {self.n('person')}.",
            lambda: f"The {name} merged its {r.choice(SECTORS)} division with the {self.n('org')} in {r.randint(1900, 2020)}.",
            lambda: f"In {r.randint(1900, 2020)}, a new headquarters designed by {self.n('person')} opened in {self.n('city')}.",
            lambda: f"The {name} was nationalised in {r.randint(1920, 1960)} and sold again in {r.randint(1961, 2010)}.",
            lambda: f"By {r.randint(1900, 2020)}, the {name} had {r.randint(2, 80)} branches across {self.n('region')}.",
            lambda: f"{self.n('person')}, a former director, wrote a history of the {name} in {r.randint(1950, 2020)}.",
            lambda: f"The {name} lost {r.randint(5, 60)} percent of its members during the crisis of {r.randint(1900, 2010)}.",
        ]

    # -- places
    def city(self, i: int) -> tuple[str, list[list[str]]]:
        r, f, rev = self.rng, self.w.facts["city"], self.w.facts["rev"]
        name, region = self.n("city", i), f["region"][i]
        country = self.n("country", self.w.facts["region"]["country"][region])
        intro = [r.choice([f"{name} is a city in {self.n('region', region)}, {country}, on the {self.n('river', f['river'][i])}.",
                           f"{name} is a town on the {self.n('river', f['river'][i])} in {self.n('region', region)}."]),
                 f"{name} had a population of {f['pop'][i]:,} at the {r.randint(1990, 2021)} census.",
                 f"The settlement was first recorded in {f['year'][i]}."]
        orgs = [f"the {self.n('org', j)}" for j in rev["orgs_in"].get(i, [])[:5]]
        life = [f"{name} is home to {_join(orgs)}."] if orgs else []
        born = [self.n("person", p) for p in rev["born_in"].get(i, [])[:6]]
        if born:
            life.append(f"People born in {name} include {_join(born)}.")
        return name, [intro, life]

    def city_filler(self, i: int) -> list:
        r, name = self.rng, self.n("city", i)
        return [
            lambda: self.fill(r.choice(_CLIMATE)),
            lambda: f"The economy of {name} rests on {r.choice(SECTORS)} and {r.choice(SECTORS)}.",
            lambda: f"A railway line to {self.n('city')} opened in {r.randint(1840, 1960)}.",
            lambda: f"The {self.n('event', self.festival())} has been held in {name} since {r.randint(1900, 2010)}.",
            lambda: f"{name} was badly damaged by a fire in {r.randint(1600, 1950)} and rebuilt by {self.n('person')}.",
            lambda: f"The old town of {name} has {r.randint(3, 60)} listed buildings, among them the {self.n('org')}.",
            lambda: f"{name} is twinned with {self.n('city')}.",
            lambda: f"The {self.n('river')} divides {name} into an old quarter and a newer industrial district.",
            lambda: f"{name} received its town charter in {r.randint(1100, 1850)}.",
            lambda: f"The {self.n('org')} moved to {name} in {r.randint(1850, 2015)}.",
            lambda: f"In {r.randint(1900, 2020)}, the population of {name} passed {r.randint(2, 900)},000.",
            lambda: f"The town hall of {name} was designed by {self.n('person')} and completed in {r.randint(1700, 1990)}.",
            lambda: f"{self.n('person')} served as mayor of {name} from {r.randint(1900, 1970)} to {r.randint(1971, 2020)}.",
        ]

    def region(self, kind: str, i: int) -> tuple[str, list[list[str]]]:
        r, name = self.rng, self.n(kind, i)
        cities = [self.n("city") for _ in range(4)]
        if kind == "river":
            intro = [f"The {name} is a river, {r.randint(40, 1400)} kilometres long, that flows through {_join(cities)}."]
        elif kind == "region":
            country = self.n("country", self.w.facts["region"]["country"][i])
            intro = [f"{name} is an administrative region of {country}, with its seat in {cities[0]}.",
                     f"Its area is {r.randint(300, 40000):,} square kilometres."]
        else:
            intro = [f"{name} is a country whose capital is {cities[0]}.",
                     f"Its largest cities are {_join(cities)}."]
        return name, [intro]

    # -- works and events
    def work(self, j: int) -> tuple[str, list[list[str]]]:
        r, f = self.rng, self.w.facts["work"]
        author = self.n("person", f["author"][j])
        intro = [f"{self.q(j)} is {_a(f['genre'][j])} of {f['year'][j]} by {author}.",
                 r.choice([f"It was published by {self.n('org', f['publisher'][j])}.",
                           f"{self.n('org', f['publisher'][j])} released it {_date(r, f['year'][j])}."]),
                 f"The story is set in {self.n('city', f['setting'][j])}." if r.random() < 0.7 else
                 f"{author} wrote most of it in {self.n('city', f['setting'][j])}."]
        return self.n("work", j), [intro]

    def work_filler(self, j: int) -> list:
        r, t = self.rng, self.q(j)
        return [
            lambda: f"Critics at the {self.n('org')} {r.choice(_OPINIONS).format(person=self.n('person'))}.",
            lambda: f"{t} sold {r.randint(2, 900) * 1000:,} copies in its first year.",
            lambda: f"{self.n('person')} adapted {t} for the stage in {r.randint(1900, 2022)}.",
            lambda: f"{t} was shortlisted for the {self.n('event')}.",
            lambda: f"A translation by {self.n('person')} appeared in {r.randint(1920, 2022)}.",
            lambda: f"Scholars of {r.choice(FIELDS)} often cite {t} alongside {self.q()}.",
            lambda: f"The first edition of {t} ran to {r.randint(90, 900)} pages.",
            lambda: f"In {r.randint(1900, 2022)}, {t} was reissued by the {self.n('org')} with a preface by {self.n('person')}.",
            lambda: f"{t} was banned in {self.n('country')} between {r.randint(1900, 1950)} and {r.randint(1951, 1990)}.",
            lambda: f"Its central character is said to be based on {self.n('person')}.",
            lambda: f"{self.n('person')} reviewed {t} for the {self.n('org')} in {r.randint(1900, 2022)}.",
        ]

    def event(self, j: int) -> tuple[str, list[list[str]]]:
        r, f = self.rng, self.w.facts["event"]
        name, city, y = self.n("event", j), self.n("city", f["city"][j]), f["year"][j]
        if name.startswith("Battle"):
            intro = [f"The {name} was fought {_date(r, y)} near {city}.",
                     f"Forces under {self.n('person', f['winner'][j])} defeated an army led by {self.n('person')}."]
        else:
            intro = [f"The {name} is an annual event first held in {city} in {y}.",
                     f"{self.n('person', f['winner'][j])} won the first edition."]
        return name, [intro]

    def event_filler(self, j: int) -> list:
        r, name = self.rng, self.n("event", j)
        return [
            lambda: f"In {r.randint(1950, 2022)}, {self.n('person')} won the {name} ahead of {self.n('person')}.",
            lambda: f"About {r.randint(2, 90) * 1000:,} visitors attended in {r.randint(1990, 2022)}.",
            lambda: f"The {self.n('org')} has organised the {name} since {r.randint(1950, 2015)}.",
            lambda: f"The {r.randint(1950, 2022)} edition moved to {self.n('city')} after flooding on the {self.n('river')}.",
            lambda: f"{self.n('person')} chaired the jury, which included {self.n('person')}.",
            lambda: f"Historians such as {self.n('person')} have written about the {name}.",
            lambda: f"A monument to the {name} was unveiled in {self.n('city')} in {r.randint(1900, 2020)}.",
            lambda: f"The {name} was not held in {r.randint(1914, 1945)} because of a dispute with the {self.n('org')}.",
            lambda: f"The prize money of the {name} rose to {r.randint(2, 200)},000 crowns in {r.randint(1950, 2022)}.",
        ]


_KINDS = [("person", 0.40), ("org", 0.20), ("city", 0.16), ("work", 0.12), ("event", 0.08), ("region", 0.02),
          ("river", 0.01), ("country", 0.01)]


def generate(tokens: int, seed: int) -> list[dict]:
    """Articles until the corpus holds about `tokens` tokens of the bundled tokenizer (within ±5 %)."""
    w = make_world(tokens, seed)
    rng = random.Random(f"articles:{seed}")
    tok = get_tokenizer()
    writer = Writer(w, rng)
    next_of = {k: 0 for k, _ in _KINDS}
    kinds, weights = zip(*_KINDS)
    rows: list[dict] = []
    total = 0
    while total < tokens:
        kind = rng.choices(kinds, weights)[0]
        if next_of[kind] >= len(w.names[kind]):
            kind = "person"
        i = next_of[kind]
        next_of[kind] += 1
        want = min(1500, max(150, int(rng.lognormvariate(math.log(430), 0.6))))
        want = min(want, max(150, tokens - total))
        if kind in ("region", "river", "country"):
            title, sections = writer.region(kind, i)
            templates = writer.generic(title)
        else:
            title, sections = getattr(writer, kind)(i)
            templates = getattr(writer, f"{kind}_filler")(i) + writer.generic(
                f"\"{title}\"" if kind == "work" else f"the {title}" if kind in ("org", "event") else title)
        paras = [[s for s in sec if s] for sec in sections if sec]
        n_tok = len(tok.encode("\n\n".join(" ".join(p) for p in paras), add_special_tokens=False).ids)
        extra: list[str] = []
        deck: list = []
        while n_tok < want:
            if not deck:  # every template once before any repeats
                deck = list(templates)
                rng.shuffle(deck)
            s = deck.pop()()
            extra.append(s[0].upper() + s[1:])
            n_tok += len(tok.encode(s, add_special_tokens=False).ids)
            if len(extra) % rng.randint(4, 7) == 0:
                paras.append(extra)
                extra = []
        if extra:
            paras.append(extra)
        text = "\n\n".join(" ".join(p) for p in paras)
        total += len(tok.encode(text, add_special_tokens=False).ids)
        rows.append({"id": f"g{len(rows):05d}", "title": title, "text": text})
    return rows


def write_corpus(rows: list[dict], out: Path, seed: int, target: int) -> dict:
    """Write rows to out/corpus.jsonl and a description (tokens, documents, seed) to out/meta.json; returns it."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tok = get_tokenizer()
    n = sum(len(e.ids) for e in tok.encode_batch([r["text"] for r in rows], add_special_tokens=False))
    meta = {"tokens": n, "documents": len(rows), "seed": seed, "target_tokens": target}
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, required=True, help="folder to write corpus.jsonl and meta.json into")
    args = ap.parse_args()
    t0 = time.perf_counter()
    meta = write_corpus(generate(args.tokens, args.seed), args.out, args.seed, args.tokens)
    print(json.dumps(meta | {"seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
