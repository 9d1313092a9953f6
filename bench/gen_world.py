"""The fictional world behind bench/gen_corpus.py: seeded names of people, organisations, places, works and
events, and the facts that tie them together (who was born where, studied where, founded and wrote what).

Names are built from syllables, so nothing comes from real data or the eval sets. Each pool is ordered by
popularity: `World.pick` draws low indices far more often (a Zipf-like law), so a few entities recur in many
articles and most in one or two. Pool sizes scale with the requested corpus size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# -- name material ------------------------------------------------------------------------------------------------
_F_ON = "Al Bel Cor Da Ed El Fa Gil Hal Ines Jo Ka Lu Mar Nel Or Pia Quin Ro Sel Ta Ul Ver Wil Yas Zo Ari Bri Cas Dor".split()
_F_MID = ["", "", "a", "e", "i", "o", "an", "el", "ri", "va", "li", "mo"]
_F_END = "ric na len tor wyn dra mond sa rin ette ias o a is ard iel ana eth ina us".split()
_S_ON = ("Ash Brem Cor Dun Fen Gal Hart Ivel Kes Lorn Mar Nor Orr Pell Quen Rav Sel Tam Vance Wex Alden Bryn "
         "Cald Drey Emer Fal Gorm Holt Isen Jast Kell Lind Mors Nash Ost Prent Rusk Stav Thorn Ulm Varr Wend").split()
_S_END = "ford wick ley mont ridge ton holm by stead wood ard ell mere croft berg ham field ing sen quist".split()
_P_ON = ("Kel Bar Ost Mir Tal Vor Sun Ard Bel Cran Dal Esk Gran Hol Ily Jor Lan Mer Nal Pra Riv Sal Tor Ulv "
         "Wes Yar Zel Amb Brig Cor Dun Fal Gel Har Ire Kos Lum Mav Nor Pel").split()
_P_END = "mouth ford haven burg ton stead wick port dale field more bury gate holm minster ness vik ora ia".split()
_ADJ = ("Silent Amber Hollow Northern Iron Glass Scarlet Quiet Broken Golden Distant Winter Salt Paper Copper "
        "Silver Crimson Last Open Lantern Pale Wild Hidden Burning Sunken Restless Patient Bright").split()
_NOUN = ("Harbour Orchard Lantern Meridian Archive Garden Tide Signal Engine Harvest Compass River Mirror Tower "
         "Season Atlas Canal Kingdom Letter Machine Voyage Field Chorus Border Island Circle Window Bridge").split()
FIELDS = ("hydrology|mathematics|civil engineering|medieval history|organic chemistry|marine biology|linguistics|"
           "architecture|economics|astronomy|philosophy|musicology|geology|public health|botany|computer science|"
           "sociology|metallurgy|cartography|law").split("|")
SECTORS = ("shipbuilding|textiles|rail transport|publishing|software|pharmaceuticals|brewing|glassmaking|banking|"
            "agricultural machinery|telecommunications|porcelain|aviation|insurance|printing|mining").split("|")
GENRES = ("novel|poetry collection|studio album|documentary film|opera|short story collection|history|memoir|"
           "feature film|symphony|play|travel book").split("|")
JOBS = ("engineer|novelist|painter|physician|composer|historian|architect|economist|politician|journalist|"
         "chemist|cartographer|sculptor|diplomat|singer|mathematician|astronomer|lawyer|teacher|photographer").split("|")
ORG_KINDS = [("University", "university"), ("Institute", "technical university"), ("Academy", "learned society"),
              ("Band", "rock band"), ("Courier", "daily newspaper"), ("Orchestra", "orchestra"), ("Bank", "bank"),
              ("Museum", "museum"), ("Club", "football club"), ("Foundation", "charitable foundation"),
              ("Railway", "railway company"), ("Shipyards", "shipbuilding company"), ("Labs", "research laboratory"),
              ("Press", "publishing house"), ("Records", "record label")]
MONTHS = "January February March April May June July August September October November December".split()


def _title_word(rng: random.Random, on: list[str], mid: list[str], end: list[str]) -> str:
    w = rng.choice(on) + rng.choice(mid) + rng.choice(end)
    for a in "aeiou":  # no "Piaanard"
        w = w.replace(a + a, a)
    return w.capitalize()


def _unique(make, n: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < n * 20:
        tries += 1
        name = make(rng)
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


@dataclass
class World:
    """Entity names per kind (index 0 = most popular) and the facts linking them (index arrays into the pools)."""

    rng: random.Random
    names: dict[str, list[str]] = field(default_factory=dict)
    facts: dict[str, dict[str, list]] = field(default_factory=dict)

    def pick(self, kind: str, rng: random.Random, skew: float = 2.2) -> int:
        """A Zipf-like draw: low indices (popular entities) far more often than high ones."""
        return min(int(len(self.names[kind]) * rng.random() ** skew), len(self.names[kind]) - 1)

    def name(self, kind: str, i: int) -> str:
        return self.names[kind][i]


def make_world(tokens: int, seed: int) -> World:
    rng = random.Random(f"world:{seed}")
    scale = max(tokens, 20_000) / 1_000_000
    n = {"person": int(120_000 * scale), "city": int(8_000 * scale), "region": int(400 * scale) + 8,
         "river": int(600 * scale) + 8, "country": max(12, int(80 * scale)), "org": int(22_000 * scale),
         "work": int(26_000 * scale), "event": int(6_000 * scale)}
    w = World(rng)

    def person(r):
        first = _title_word(r, _F_ON, _F_MID, _F_END)
        last = _title_word(r, _S_ON, [""] * 6 + ["a", "e", "o"], _S_END)
        return f"{first} {last}" if r.random() < 0.85 else f"{first} {_title_word(r, _F_ON, _F_MID, _F_END)} {last}"

    w.names["person"] = _unique(person, n["person"], rng)
    w.names["city"] = _unique(lambda r: (("Port " if r.random() < 0.08 else "New " if r.random() < 0.05 else "")
                                         + _title_word(r, _P_ON, _F_MID, _P_END)), n["city"], rng)
    w.names["region"] = _unique(lambda r: _title_word(r, _P_ON, _F_MID, ["a", "ia", "and", "mark", "shire", "ey"])
                                + " " + r.choice(["Province", "County", "Valley", "District", "Region"]), n["region"], rng)
    w.names["river"] = _unique(lambda r: _title_word(r, _P_ON, _F_MID, ["en", "a", "is", "ow", "e", "ar"]) + " River",
                               n["river"], rng)
    w.names["country"] = _unique(lambda r: (r.choice(["Republic of ", "Kingdom of ", ""])
                                            + _title_word(r, _P_ON, _F_MID, ["and", "ia", "ara", "istan", "ovia"])),
                                 n["country"], rng)
    cities = w.names["city"]

    def org(r):
        c, s = r.choice(cities), _title_word(r, _S_ON, [""], _S_END)
        return r.choice([f"University of {c}", f"{c} Institute of Technology", f"{s} Industries", f"{s} Press",
                         f"{c} Railway Company", f"{s} Records", f"{c} Symphony Orchestra", f"{s} Labs",
                         f"{c} Museum of Art", f"{s} and {_title_word(r, _S_ON, [''], _S_END)} Bank",
                         f"{c} Courier", f"{r.choice(_ADJ)} {r.choice(_NOUN)} Band", f"{s} Foundation",
                         f"{c} Football Club", f"{s} Shipyards", f"{c} Academy of Sciences"])

    w.names["org"] = _unique(org, n["org"], rng)
    w.names["work"] = _unique(lambda r: r.choice([f"The {r.choice(_ADJ)} {r.choice(_NOUN)}",
                                                  f"{r.choice(_NOUN)} of {r.choice(_NOUN)}s",
                                                  f"A {r.choice(_NOUN)} in {r.choice(cities)}",
                                                  f"{r.choice(_ADJ)} {r.choice(_NOUN)}s"]), n["work"], rng)
    w.names["event"] = _unique(lambda r: r.choice([f"{r.choice(cities)} Music Festival", f"Battle of {r.choice(cities)}",
                                                   f"{_title_word(r, _S_ON, [''], _S_END)} Prize",
                                                   f"{r.choice(cities)} Film Festival",
                                                   f"{r.choice(cities)} Rowing Championship",
                                                   f"{r.choice(cities)} Summit", f"{r.choice(cities)} Book Award"]),
                               n["event"], rng)
    for k in n:
        n[k] = len(w.names[k])
    f = w.facts
    unis = [j for j, nm in enumerate(w.names["org"]) if any(x in nm for x in ("University", "Institute", "Academy"))]
    f["person"] = {k: [] for k in ("born", "year", "job", "field", "uni", "employer", "spouse", "died")}
    for _ in range(n["person"]):
        y = rng.randint(1820, 1990)
        f["person"]["born"].append(w.pick("city", rng, 1.6))
        f["person"]["year"].append(y)
        f["person"]["job"].append(rng.choice(JOBS))
        f["person"]["field"].append(rng.choice(FIELDS))
        f["person"]["uni"].append(unis[min(int(len(unis) * rng.random() ** 2.0), len(unis) - 1)])
        f["person"]["employer"].append(w.pick("org", rng, 1.8))
        f["person"]["spouse"].append(w.pick("person", rng, 1.5) if rng.random() < 0.5 else -1)
        f["person"]["died"].append(y + rng.randint(40, 95) if y < 1950 and rng.random() < 0.8 else 0)
    f["org"] = {"city": [w.pick("city", rng, 1.7) for _ in range(n["org"])],
                "founder": [w.pick("person", rng, 1.7) for _ in range(n["org"])],
                "year": [rng.randint(1780, 2015) for _ in range(n["org"])],
                "sector": [rng.choice(SECTORS) for _ in range(n["org"])],
                "staff": [int(10 ** rng.uniform(1.3, 4.8)) for _ in range(n["org"])]}
    f["city"] = {"region": [w.pick("region", rng, 1.3) for _ in range(n["city"])],
                 "river": [w.pick("river", rng, 1.5) for _ in range(n["city"])],
                 "pop": [int(10 ** rng.uniform(3.2, 6.4)) for _ in range(n["city"])],
                 "year": [rng.randint(900, 1900) for _ in range(n["city"])]}
    f["region"] = {"country": [w.pick("country", rng, 1.2) for _ in range(n["region"])]}
    f["work"] = {"author": [w.pick("person", rng, 1.8) for _ in range(n["work"])],
                 "publisher": [w.pick("org", rng, 1.9) for _ in range(n["work"])],
                 "year": [rng.randint(1850, 2020) for _ in range(n["work"])],
                 "genre": [rng.choice(GENRES) for _ in range(n["work"])],
                 "setting": [w.pick("city", rng, 1.6) for _ in range(n["work"])]}
    for j, a in enumerate(f["work"]["author"]):  # within the author's working life
        f["work"]["year"][j] = f["person"]["year"][a] + rng.randint(22, 60)
        if f["person"]["died"][a]:
            f["work"]["year"][j] = min(f["work"]["year"][j], f["person"]["died"][a])
    f["event"] = {"city": [w.pick("city", rng, 1.6) for _ in range(n["event"])],
                  "year": [rng.randint(1850, 2020) for _ in range(n["event"])],
                  "winner": [w.pick("person", rng, 1.8) for _ in range(n["event"])]}
    # reverse facts, so an article about a parent lists its children
    w.facts["rev"] = {"works_of": {}, "founded": {}, "alumni": {}, "orgs_in": {}, "born_in": {}, "won": {}}
    rev = w.facts["rev"]
    for j, a in enumerate(f["work"]["author"]):
        rev["works_of"].setdefault(a, []).append(j)
    for j, p in enumerate(f["org"]["founder"]):
        rev["founded"].setdefault(p, []).append(j)
    for j, c in enumerate(f["org"]["city"]):
        rev["orgs_in"].setdefault(c, []).append(j)
    for j, u in enumerate(f["person"]["uni"]):
        rev["alumni"].setdefault(u, []).append(j)
    for j, c in enumerate(f["person"]["born"]):
        rev["born_in"].setdefault(c, []).append(j)
    for j, p in enumerate(f["event"]["winner"]):
        if not w.names["event"][j].startswith("Battle"):
            rev["won"].setdefault(p, []).append(j)
    return w
