"""Model replies: repair of almost-JSON (code fences, prose around it, trailing commas, unclosed brackets),
validation against the pydantic result models, and clean-up of what the model returned. A reply nested deeper than
the parsers go (json's recursion limit, pydantic's) is a MalformedReply like any unusable one, never a
RecursionError."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from core.protocols import Extraction, QueryTerms, RatedPoint, RatedPoints, Report, Summary

M = TypeVar("M", bound=BaseModel)


class MalformedReply(ValueError):
    """The server answered, but the reply is not usable (not JSON, not the schema, empty)."""


# -- JSON repair ---------------------------------------------------------------------------------------------------

# control characters (tab, newline and carriage return kept), raw or as JSON escapes: a model may return them, and
# PostgreSQL refuses NUL in text
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\\u00(?:0[0-8bcefBCEF]|1[0-9a-fA-F]|7[fF])")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_MAX_CUTS = 12


def _drop_trailing_comma(out: list[str]) -> None:
    i = len(out) - 1
    while i >= 0 and out[i].isspace():
        i -= 1
    if i >= 0 and out[i] == ",":
        del out[i:]


def _scan(s: str) -> tuple[str, list[tuple[int, tuple[str, ...]]]]:
    """Balance `s` (starting at its first '{'): drop trailing commas and stray closers, close an unterminated
    string and unclosed brackets, stop at the end of the outermost object. Also returns every top-level-or-deeper
    comma position with the closers open there, so a truncated reply can be cut back to a complete element."""
    out: list[str] = []
    stack: list[str] = []
    commas: list[tuple[int, tuple[str, ...]]] = []
    in_str = esc = False
    for ch in s:
        if in_str:
            out.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
            out.append(ch)
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
            out.append(ch)
        elif ch in "}]":
            if ch not in stack:
                continue  # a closer with nothing to close
            _drop_trailing_comma(out)
            while stack:
                c = stack.pop()
                out.append(c)
                if c == ch:
                    break
            if not stack:
                return "".join(out), commas
        elif ch == ",":
            commas.append((len(out), tuple(stack)))
            out.append(ch)
        else:
            out.append(ch)
    if in_str:
        if esc:
            out.pop()
        out.append('"')
    _drop_trailing_comma(out)
    out.extend(reversed(stack))
    return "".join(out), commas


def repair_candidates(text: str) -> Iterator[dict[str, Any]]:
    """JSON objects recoverable from a model reply, best first: the reply as is, then repaired, then cut back
    to its last complete elements (for a reply truncated mid-way)."""
    text = (text or "").strip()
    try:
        value = json.loads(text, strict=False)
        if isinstance(value, dict):
            yield value
            return
    except (ValueError, RecursionError):
        pass
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    start = text.find("{")
    if start < 0:
        return
    fixed, commas = _scan(text[start:])
    candidates = [fixed]
    for pos, open_closers in reversed(commas[-_MAX_CUTS:]):
        candidates.append(fixed[:pos] + "".join(reversed(open_closers)))
    for cand in candidates:
        try:
            value = json.loads(cand, strict=False)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value


def repair_json(text: str) -> dict[str, Any] | None:
    """The first JSON object recoverable from `text`, or None."""
    return next(repair_candidates(text), None)


def _validation_summary(exc: ValidationError) -> str:
    errs = exc.errors()
    parts = [f"{'.'.join(str(p) for p in e.get('loc', ())) or '<root>'}: {e.get('msg', '')}" for e in errs[:3]]
    more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
    return "; ".join(parts) + more


def strip_controls(content: str) -> str:
    """A reply without control characters (tab, newline, carriage return kept), raw or JSON-escaped."""
    return _CONTROLS.sub("", content or "")


def parse_reply(content: str, model: type[M]) -> M:
    """Validate a reply against `model`, repairing near-JSON; raise MalformedReply when nothing validates."""
    try:
        return _parse(content, model)
    except RecursionError:
        raise MalformedReply(f"reply nested too deep to read ({len(content or ''):,} characters)") from None


def _parse(content: str, model: type[M]) -> M:
    try:
        return model.model_validate_json(content)
    except ValidationError as exc:
        first = exc
    last_error: str | None = None
    for data in repair_candidates(content):
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            last_error = _validation_summary(exc)
    if last_error is None:
        snippet = " ".join((content or "").split())[:120]
        if not snippet:
            raise MalformedReply("empty reply")
        invalid = [str(e.get("msg", "")) for e in first.errors() if e.get("type") == "json_invalid"]
        if any("recursion limit" in msg for msg in invalid):
            raise MalformedReply(f"reply nested too deep to read: {snippet[:40]!r}")
        if invalid:
            raise MalformedReply(f"not JSON: {snippet!r}")
        last_error = _validation_summary(first)
    raise MalformedReply(f"reply does not match {model.__name__}: {last_error}")


# -- result clean-up ------------------------------------------------------------------------------------------------


def _clamp(x: float, lo: float, hi: float, default: float) -> float:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return default
    return float(min(hi, max(lo, x)))


def _flat(s: str) -> str:
    return " ".join((s or "").split())


def clean_extraction(ex: Extraction) -> Extraction:
    """Trim names, drop nameless entities, drop relationships whose ends are not extracted entities (matched
    case-insensitively, then spelled as the entity), clamp weights to 1..10, drop empty statements."""
    entities = []
    canonical: dict[str, str] = {}
    for e in ex.entities:
        name = _flat(e.name)
        if not name:
            continue
        canonical.setdefault(name.casefold(), name)
        update = {"name": name, "type": _flat(e.type), "description": e.description.strip()}
        entities.append(e.model_copy(update=update))
    relationships = []
    for r in ex.relationships:
        src, dst = canonical.get(_flat(r.source).casefold()), canonical.get(_flat(r.target).casefold())
        if src is None or dst is None:
            continue
        relationships.append(
            r.model_copy(
                update={
                    "source": src,
                    "target": dst,
                    "predicate": _flat(r.predicate),
                    "description": r.description.strip(),
                    "weight": _clamp(r.weight, 1.0, 10.0, 1.0),
                }
            )
        )
    statements = [_flat(s) for s in ex.statements if _flat(s)]
    return Extraction(entities=entities, relationships=relationships, statements=statements)


def clean_summary(rep: Summary, subject: str) -> Summary:
    title = _flat(rep.title) or _flat(subject) or "Untitled"
    return rep.model_copy(update={"title": title, "summary": rep.summary.strip() or title,
                                  "keywords": [_flat(k) for k in rep.keywords if _flat(k)]})


def clean_report(rep: Report) -> Report:
    findings = [
        f.model_copy(update={"importance": _clamp(f.importance, 0.0, 10.0, 5.0)})
        for f in rep.findings
        if f.summary.strip() or f.explanation.strip()
    ]
    return rep.model_copy(
        update={
            "title": _flat(rep.title),
            "summary": rep.summary.strip(),
            "findings": findings,
            "rating": _clamp(rep.rating, 0.0, 10.0, 5.0),
            "keywords": [_flat(k) for k in rep.keywords if _flat(k)],
        }
    )


def clean_points(rep: RatedPoints) -> list[RatedPoint]:
    """Points with text, scores clamped to 0-100 (rounded: the prompt asks for integers), a repeated text once."""
    out: list[RatedPoint] = []
    seen: set[str] = set()
    for p in rep.points:
        text = _flat(p.description)
        if not text or text.casefold() in seen:
            continue
        seen.add(text.casefold())
        out.append(RatedPoint(description=text, score=round(_clamp(p.score, 0.0, 100.0, 0.0))))
    return out


def clean_terms(t: QueryTerms) -> QueryTerms:
    def uniq(xs: list[str]) -> list[str]:
        return list(dict.fromkeys(x for x in (_flat(v) for v in xs) if x))

    return QueryTerms(entities=uniq(t.entities), keywords=uniq(t.keywords))
