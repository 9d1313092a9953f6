"""Row formats: one document per CSV/TSV row, JSONL line or JSON array item."""

from __future__ import annotations

import csv
import io
import json
import sys

from core.ingest.formats import Parsed, ParseResult, RefusedError, clean_text, decode_text, nonspace_count, one_line
from core.ingest.limits import over_limit

TEXT_FIELDS = ("text", "content", "body", "passage", "document")
TITLE_FIELDS = ("title", "name", "heading")
ID_FIELDS = ("id", "doc_id", "_id")


def _check_rows(count: int, max_rows: int | None, unit: str = "rows") -> None:
    if max_rows is not None and count > max_rows:
        raise RefusedError(over_limit(f"too many {unit}", f"{count:,}", f"{max_rows:,}", "max_table_rows"))


def _raise_csv_field_limit() -> None:
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 10


def _pick(names: list[str], wanted: tuple[str, ...]) -> int | None:
    lowered = [n.strip().lower() for n in names]
    for w in wanted:
        if w in lowered:
            return lowered.index(w)
    return None


def _row_title(title: str, stem: str, number: int) -> str:
    title = " ".join(title.split())
    return title if title else f"{stem} #{number}"


def _title_from(title: str) -> dict:
    """A row titled by its own title field names its subject; a row numbered after its file does not."""
    return {"title_from": "field" if " ".join(title.split()) else "filename"}


def _skipped(numbers: list[int], what: str, unit: str) -> str:
    """E.g. "3 rows without text skipped (rows 2, 5, 9)"; `what` and `unit` are singular."""
    count = len(numbers)
    shown = ", ".join(str(n) for n in numbers[:5]) + (", …" if count > 5 else "")
    plural = "s" if count > 1 else ""
    head, _, tail = what.partition(" ")
    what = f"{head}{plural} {tail}".strip() if what.startswith(unit) else f"{head} {tail}{plural}"
    return f"{count} {what} skipped ({unit}{plural} {shown})"


def parse_csv(data: bytes, stem: str, min_chars: int, delimiter: str | None = None,
              max_rows: int | None = None) -> ParseResult:
    text, _ = decode_text(data)
    _raise_csv_field_limit()
    if delimiter is None:
        header_line = next((line for line in text.split("\n", 20) if line.strip()), "")
        counts = {d: header_line.count(d) for d in (",", ";", "\t", "|")}
        delimiter = max(counts, key=lambda d: counts[d]) if max(counts.values()) else ","
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter):
            rows.append(row)
            if max_rows is not None and len(rows) > max_rows + 1:  # the header, then more rows than allowed
                raise RefusedError(over_limit("too many rows", f"more than {max_rows:,}", f"{max_rows:,}",
                                              "max_table_rows"))
    except csv.Error as exc:
        raise RefusedError(f"malformed CSV: {one_line(exc, 100)}") from None

    def blank(row: list[str]) -> bool:
        return not any(c.strip() for c in row)

    while rows and blank(rows[0]):
        rows.pop(0)
    # Row numbers count data rows after the header; blank rows keep their number but are skipped silently.
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    if not any(not blank(r) for r in body):
        raise RefusedError("no data rows (a header row and at least one row are needed)")
    text_col = _pick(header, TEXT_FIELDS)
    if text_col is None:
        width = max(len(header), *(len(r) for r in body))
        avg = [sum(len(r[c]) if c < len(r) else 0 for r in body) / len(body) for c in range(width)]
        text_col = max(range(width), key=lambda c: avg[c])
    title_col, id_col = _pick(header, TITLE_FIELDS), _pick(header, ID_FIELDS)

    def cell(row: list[str], col: int | None) -> str:
        return row[col].strip() if col is not None and col < len(row) else ""

    records, empty = [], []
    for number, row in enumerate(body, start=1):
        if blank(row):
            continue
        body_text = clean_text(cell(row, text_col))
        if nonspace_count(body_text) < min_chars:
            empty.append(number)
            continue
        ext = cell(row, id_col) or None
        title = cell(row, title_col)
        records.append(Parsed(_row_title(title, stem, number), body_text, ext, {"row": number, **_title_from(title)}))
    problems = [_skipped(empty, "row without text", "row")] if empty else []
    return ParseResult(records, problems)


def _field(obj: dict, names: tuple[str, ...]):
    lowered = {str(k).lower(): v for k, v in obj.items()}
    for n in names:
        if n in lowered and lowered[n] is not None:
            return lowered[n]
    return None


def _id_string(value) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (int, float, str)):
        s = str(value).strip()
        return s or None
    return None


def _record(obj: dict, stem: str, number: int, min_chars: int) -> Parsed | None:
    body = _field(obj, TEXT_FIELDS)
    if not isinstance(body, str) or nonspace_count(body) < min_chars:
        return None
    title = _field(obj, TITLE_FIELDS)
    title = title if isinstance(title, str) else ""
    return Parsed(_row_title(title, stem, number), clean_text(body), _id_string(_field(obj, ID_FIELDS)),
                  {"row": number, **_title_from(title)})


def parse_jsonl(data: bytes, stem: str, min_chars: int, max_rows: int | None = None) -> ParseResult:
    text, _ = decode_text(data)
    if max_rows is not None:
        lines = sum(1 for line in text.split("\n") if line.strip())
        _check_rows(lines, max_rows, "lines")
    records, bad, empty = [], [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            bad.append(number)
            continue
        if not isinstance(obj, dict):
            bad.append(number)
            continue
        rec = _record(obj, stem, number, min_chars)
        if rec is None:
            empty.append(number)
        else:
            records.append(rec)
    if not records and not bad and not empty:
        raise RefusedError("empty file")
    problems = []
    if bad:
        problems.append(_skipped(bad, "malformed line", "line"))
    if empty:
        problems.append(_skipped(empty, "line without text", "line"))
    return ParseResult(records, problems)


def parse_json(data: bytes, stem: str, min_chars: int, max_rows: int | None = None) -> ParseResult:
    text, _ = decode_text(data)
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RefusedError(f"malformed JSON: {one_line(exc, 100)}") from None
    items = obj if isinstance(obj, list) else [obj]
    _check_rows(len(items), max_rows, "items")
    records, empty = [], []
    for number, item in enumerate(items, start=1):
        rec = _record(item, stem, number, min_chars) if isinstance(item, dict) else None
        if rec is None:
            empty.append(number)
        else:
            records.append(rec)
    if not records:
        raise RefusedError("no objects with a text field (text, content, body, passage)")
    problems = [_skipped(empty, "row without text", "row")] if empty else []
    return ParseResult(records, problems)
