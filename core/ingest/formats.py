"""Format parsers: bytes of one file -> parsed records. Problems are raised as `RefusedError` with a one-line reason.

Nothing here knows about archives, size limits or filenames beyond the stem used as a fallback title; that is the
job of `core.ingest.loaders`.
"""

from __future__ import annotations

import codecs
import io
import re
import warnings
import zipfile
from dataclasses import dataclass, field

from core.ingest.limits import over_limit
from core.ingest.markup import html_to_text, markdown_to_text

# C0 control bytes other than \t \n \f \r, plus DEL: their share tells binary from text.
_CONTROL_BYTES = bytes([*range(0, 9), 11, *range(14, 32), 127])
_CONTROL_CHARS_RE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")
_SURROGATES_RE = re.compile("[\ud800-\udfff]")
_BINARY_RATIO = 0.05
_BINARY = "binary content, not a supported text format"


class RefusedError(Exception):
    """The file cannot be loaded; the message is the human-readable reason."""


@dataclass
class Parsed:
    title: str
    text: str
    external_id: str | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class ParseResult:
    records: list[Parsed]
    problems: list[str] = field(default_factory=list)  # partial refusals (skipped rows), file still accepted


# --------------------------------------------------------------------------------------------------- text helpers
def clean_text(text: str) -> str:
    """Normalise newlines to \\n and drop control characters other than tab, newline and form feed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _SURROGATES_RE.sub("\ufffd", text)  # lone surrogates (e.g. from JSON escapes) cannot be stored
    return _CONTROL_CHARS_RE.sub("", text)


def _control_ratio(data: bytes) -> float:
    sample = data[:65536]
    if not sample:
        return 0.0
    return (len(sample) - len(sample.translate(None, _CONTROL_BYTES))) / len(sample)


def _looks_utf16_without_bom(data: bytes) -> str | None:
    sample = data[:4096]
    if len(sample) < 8 or len(sample) % 2:
        return None
    even, odd = sample[0::2], sample[1::2]
    half = len(sample) // 2
    if odd.count(0) > 0.4 * half and even.count(0) < 0.05 * half:
        return "utf-16-le"
    if even.count(0) > 0.4 * half and odd.count(0) < 0.05 * half:
        return "utf-16-be"
    return None


def decode_text(data: bytes) -> tuple[str, str]:
    """(text, encoding name). UTF-8 (BOM stripped), UTF-16/32 with BOM, else cp1252/latin-1 if it looks like text."""
    for bom, enc in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(enc)
            except UnicodeDecodeError as exc:
                raise RefusedError(f"not valid {enc.upper()} text (byte {exc.start})") from None
            _check_text_chars(text)
            return clean_text(text), enc
    if b"\x00" in data:
        enc16 = _looks_utf16_without_bom(data)
        if enc16:
            try:
                text = data.decode(enc16)
            except UnicodeDecodeError:
                raise RefusedError(_BINARY) from None
            _check_text_chars(text)
            return clean_text(text), enc16
        raise RefusedError(_BINARY)
    if _control_ratio(data) > _BINARY_RATIO:
        raise RefusedError(_BINARY)
    try:
        return clean_text(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return clean_text(data.decode("cp1252")), "cp1252"
    except UnicodeDecodeError:
        return clean_text(data.decode("latin-1")), "latin-1"


def _check_text_chars(text: str) -> None:
    sample = text[:65536]
    if sample and len(_CONTROL_CHARS_RE.findall(sample)) / len(sample) > _BINARY_RATIO:
        raise RefusedError(_BINARY)


def _title_from(title: str, source: str) -> str:
    """Where a document's title came from (Document.meta["title_from"]): `source` when the file names itself, else
    "filename" (the stem stands in). Only a real title may name the document's subject (core.pipeline.stages.extract)."""
    return source if title else "filename"


def one_line(msg: object, limit: int = 160) -> str:
    s = " ".join(str(msg).split()) or "unknown error"
    return s if len(s) <= limit else s[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------------- plain text
def parse_text(data: bytes, stem: str) -> ParseResult:
    text, enc = decode_text(data)
    return ParseResult([Parsed(stem, text, meta={"encoding": enc, "title_from": "filename"})])


def parse_markdown(data: bytes, stem: str) -> ParseResult:
    """The text a reader of the rendered page sees (core.ingest.markup), the first level-1 heading as its title."""
    source, enc = decode_text(data)
    title, text = markdown_to_text(source)
    return ParseResult([Parsed(title or stem, clean_text(text),
                               meta={"encoding": enc, "title_from": _title_from(title, "heading")})])


# ----------------------------------------------------------------------------------------------------------- HTML
def parse_html(data: bytes, stem: str) -> ParseResult:
    if data.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in data:
        markup: str | bytes = decode_text(data)[0]
    else:
        if _control_ratio(data) > _BINARY_RATIO:
            raise RefusedError(_BINARY)
        try:
            markup = data.decode("utf-8")
        except UnicodeDecodeError:
            markup = data  # let BeautifulSoup honour a declared charset
    title, text = html_to_text(markup)
    return ParseResult([Parsed(title or stem, clean_text(text), meta={"title_from": _title_from(title, "html")})])


# ------------------------------------------------------------------------------------------------------------ PDF
def parse_pdf(data: bytes, stem: str, max_pages: int | None = None) -> ParseResult:
    import logging

    from pypdf import PdfReader

    if b"%PDF-" not in data[:1024]:
        raise RefusedError("corrupt PDF: missing %PDF header")
    pypdf_log = logging.getLogger("pypdf")
    old_level = pypdf_log.level
    pypdf_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                reader = PdfReader(io.BytesIO(data))
                if reader.is_encrypted:
                    try:
                        ok = reader.decrypt("")
                    except Exception as exc:  # noqa: BLE001 - missing crypto backend, unknown algorithm...
                        raise RefusedError(f"encrypted PDF, cannot decrypt: {one_line(exc, 80)}") from None
                    if not ok:
                        raise RefusedError("encrypted PDF (password required)")
                pages = reader.pages
                n_pages = len(pages)
            except RefusedError:
                raise
            except Exception as exc:  # noqa: BLE001 - pypdf raises many types on damaged files
                raise RefusedError(f"corrupt PDF: {one_line(exc, 100)}") from None
            if max_pages is not None and n_pages > max_pages:
                raise RefusedError(over_limit("too many PDF pages", f"{n_pages:,}", f"{max_pages:,}", "max_pdf_pages"))
            texts: list[str] = []
            failures = 0
            for page in pages:
                try:
                    texts.append(clean_text(page.extract_text() or "").strip())
                except Exception:  # noqa: BLE001
                    failures += 1
            title = ""
            try:
                meta = reader.metadata
                title = " ".join(str(meta.title).split()) if meta and meta.title else ""
            except Exception:  # noqa: BLE001
                title = ""
    finally:
        pypdf_log.setLevel(old_level)
    if n_pages and failures == n_pages:
        raise RefusedError("corrupt PDF: no page could be read")
    text = "\n\n".join(t for t in texts if t)
    if not text.strip():
        raise RefusedError("no extractable text (scanned PDF?)")
    return ParseResult([Parsed(title or stem, text, meta={"pages": n_pages, "title_from": _title_from(title, "metadata")})])


# ----------------------------------------------------------------------------------------------------------- DOCX
def parse_docx(data: bytes, stem: str, max_total_bytes: int) -> ParseResult:
    """`max_total_bytes` bounds what its parts unpack to: zipfile stops a member at its declared size (a member
    that lies fails its CRC check), so the declared sizes are what python-docx can read."""
    import docx
    from docx.table import Table

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            declared = sum(i.file_size for i in zf.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise RefusedError(f"corrupt DOCX: {one_line(exc, 100)}") from None
    if declared > max_total_bytes:
        raise RefusedError(over_limit("DOCX too large when unpacked", fmt_bytes(declared), fmt_bytes(max_total_bytes),
                                      "max_docx_xml_bytes"))
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - PackageNotFoundError, KeyError, lxml errors...
        raise RefusedError(f"corrupt DOCX: {one_line(exc, 100)}") from None
    blocks: list[str] = []
    heading = ""
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            blocks.extend(_table_lines(item))
            continue
        para = item.text.strip()
        if not para:
            continue
        style = (item.style.name if item.style is not None else "") or ""
        if not heading and (style.startswith("Heading") or style == "Title"):
            heading = para
        blocks.append(para)
    core_title = " ".join((document.core_properties.title or "").split())
    title_from = "metadata" if core_title else _title_from(heading, "heading")
    return ParseResult([Parsed(core_title or heading or stem, clean_text("\n\n".join(blocks)),
                               meta={"title_from": title_from})])


def _table_lines(table) -> list[str]:
    lines = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # merged cells repeat
                continue
            seen.add(id(cell._tc))
            t = " ".join(cell.text.split())
            if t:
                cells.append(t)
        if cells:
            lines.append(" | ".join(cells))
    return lines


# ------------------------------------------------------------------------------------------------------- helpers
def nonspace_count(text: str) -> int:
    return len("".join(text.split()))


def fmt_bytes(n: int) -> str:
    if n >= 1024 * 1024:
        v = n / (1024 * 1024)
        return f"{v:.1f} MB" if v != int(v) else f"{int(v)} MB"
    if n >= 1024:
        v = n / 1024
        return f"{v:.1f} KB" if v != int(v) else f"{int(v)} KB"
    return f"{n} bytes"
