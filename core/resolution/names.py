"""Entity names compared token by token: the evidence of name similarity for entity resolution (core/resolution/merge.py
explains how it is combined with types, embeddings and shared neighbours), and `settle`: an entity's title, type
and text from all its mentions, whose descriptions `add_description` keeps (the extract stage's fold, a refold and
an entity merge all keep them so: core/pipeline/mentions.py)."""

from __future__ import annotations

import difflib
import functools
import re

DESC_CAP = 1200  # characters of descriptions an entity or relationship keeps (checked before each append)
_GLUE = frozenset({"of", "the", "and", "&"})
_LEGAL = frozenset("inc incorporated corp corporation co company ltd limited llc llp lp plc gmbh ag sa nv bv pty"
                   .split())
_TITLES = frozenset("""professor prof dr doctor mr mrs ms miss mx sir dame judge justice mayor president senator
    governor captain rev reverend""".split())
_ROMAN = re.compile(r"^[ivxlcdm]+$")


def name_tokens(key: str) -> tuple[str, ...]:
    """Tokens of a normalized name without a leading title before a full name, glue words and trailing legal forms:
    "professor daniel osei" -> (daniel, osei), "acme corporation inc" -> (acme,); "mayor of port halden" keeps
    its title (the mayor is not the town), "dr smith" too (a bare surname names no one in particular)."""
    raw = key.split()
    if len(raw) >= 3 and raw[0] in _TITLES and raw[1] not in _GLUE:
        raw = raw[1:]
    toks = [t for t in raw if t not in _GLUE]
    while len(toks) > 1 and toks[-1] in _LEGAL:
        toks.pop()
    return tuple(toks)


def _token_match(x: str, y: str) -> tuple[float, str]:
    if x == y:
        return 1.0, "exact"
    if (len(x) == 1 and y.startswith(x)) or (len(y) == 1 and x.startswith(y)):
        return 0.8, "initial"
    if min(len(x), len(y)) >= 3 and x.isalpha() and y.isalpha() and not (_ROMAN.match(x) or _ROMAN.match(y)):
        r = difflib.SequenceMatcher(None, x, y).ratio()
        if r >= 0.85:
            return r, "spelling"
    return 0.0, ""


@functools.lru_cache(maxsize=1 << 18)  # the merge stage asks again for most pairs in each of its rounds
def name_similarity(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[float, str]:
    """(similarity 0-1, how the names match) of two token tuples from `name_tokens` (see the module docstring)."""
    if not a or not b:
        return 0.0, "none"
    if a == b or "".join(a) == "".join(b):
        return 1.0, "same_core"
    if sorted(a) == sorted(b):
        return 0.9, "reordered"
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    weights, kinds, j = [], set(), 0
    for tok in short:
        for k in range(j, len(long_)):
            w, kind = _token_match(tok, long_[k])
            if w:
                weights.append(w)
                kinds.add(kind)
                j = k + 1
                break
        else:
            break
    if len(weights) == len(short):
        mean = sum(weights) / len(weights)
        if len(short) == len(long_):
            return mean, ("initials" if "initial" in kinds else "spelling")
        ratio = sum(map(len, short)) / sum(map(len, long_))
        return (0.75 + 0.2 * ratio) * mean, "contained"
    shared = len(set(a) & set(b))
    return 0.9 * 2 * shared / (len(a) + len(b)), "partial"


def combined_score(name: float, same_type: float, cosine: float | None, jaccard: float) -> float:
    e = 0.0 if cosine is None else min(1.0, max(0.0, (cosine - 0.5) / 0.5))
    return round(same_type * (1 - (1 - name) * (1 - e / 2) * (1 - jaccard / 2)), 4)




def settle(title: str, typ: str, data: dict | None) -> tuple[str, str, str]:
    """(title, type, text) of an entity from all its mentions: the most used surface form (longest on ties) unless
    a reviewer chose its name (`data["name"]`), the most used type, its descriptions joined (or its title). The
    resolve stage and every merge settle entities so."""
    data = data or {}
    aliases: dict = data.get("aliases", {})
    types: dict = data.get("types", {})
    if aliases:
        title = max(aliases.items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0]
    if data.get("name"):  # the name a reviewer chose when merging (core/resolution/review.py `choose_name`)
        title = str(data["name"])
    if types:
        typ = max(types.items(), key=lambda kv: (kv[1], kv[0]))[0]
    descs = data.get("descriptions", [])
    return title, typ, " ".join(descs) if descs else title


def add_description(descs: list[str], n_about: int, desc: str, about: bool) -> tuple[list[str], int]:
    """(descriptions, how many lead as `about`) after one more: the list is always the first `n_about` (from passages
    about the entity) then the others, each in arrival order, deduplicated, taken while the characters before an
    item are under DESC_CAP. So the result does not depend on how the two groups' arrivals interleave."""
    lead, rest = descs[:n_about], descs[n_about:]
    if about:
        rest = [d for d in rest if d != desc]
        if desc not in lead and sum(map(len, lead)) < DESC_CAP:
            lead = lead + [desc]
    elif desc not in lead and desc not in rest:
        rest = rest + [desc]
    out, used = [], 0
    for d in lead + rest:
        if used >= DESC_CAP:
            break
        out.append(d)
        used += len(d)
    return out, min(len(lead), len(out))
