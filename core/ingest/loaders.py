"""Turn uploaded bytes or files on disk into documents, refusing what cannot be read with a one-line reason.

Every file (and every archive member) is accepted or refused on its own: a bad member never loses the others, and
no parser exception escapes `load_bytes`. Refusals are counted and grouped by reason (core/ingest/refusals.py), and
one uploaded file's archives (a zip and the zips inside it) are read up to `ingest.max_archive_members` members in
all: whatever an archive holds, what comes back is bounded.
"""

from __future__ import annotations

import io
import os
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from core.config import IngestSettings
from core.ingest import formats, records
from core.ingest.formats import RefusedError, fmt_bytes, nonspace_count, one_line
from core.ingest.limits import over_limit
from core.ingest.refusals import Refusals

SUPPORTED_EXTENSIONS: tuple[str, ...] = (
    ".txt", ".text", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx",
    ".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".zip",
)  # fmt: skip
_SUPPORTED_SHORT = "txt, md, html, pdf, docx, csv, jsonl, zip"
_MIME = {
    ".txt": "text/plain", ".text": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
    ".html": "text/html", ".htm": "text/html", ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".csv": "text/csv", ".tsv": "text/tab-separated-values", ".jsonl": "application/jsonl",
    ".ndjson": "application/x-ndjson", ".json": "application/json", ".zip": "application/zip",
}  # fmt: skip
_MAX_NAME = 200
_ZIP_DEPTH = 1  # archives inside an archive are opened; archives inside those are refused
_READ_CHUNK = 1 << 20


@dataclass
class LoadedDoc:
    title: str
    text: str
    filename: str
    mime: str
    external_id: str | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class _Archive:
    """What one uploaded file's archives may still unpack: bytes (ingest.max_zip_total_bytes) and members
    (ingest.max_archive_members), shared by the zips inside it; `full` once a member was past the latter."""

    bytes_left: int
    members_left: int
    full: bool = False


Result = tuple[list[LoadedDoc], Refusals]


def safe_filename(name: str) -> str:
    """A display-safe basename: no directories, no control/format characters, at most 200 characters."""
    name = unicodedata.normalize("NFC", str(name))
    name = "".join(ch for ch in name if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"))
    name = name.replace("\\", "/").rstrip("/ ").rsplit("/", 1)[-1]
    name = "".join("_" if ch in '<>:"|?*' else ch for ch in name).strip()
    if name.strip(".") == "":
        return "unnamed"
    if len(name) > _MAX_NAME:
        stem, dot, ext = name.rpartition(".")
        if dot and stem and len(ext) <= 16:
            name = stem[: _MAX_NAME - len(ext) - 1].rstrip() + "." + ext
        else:
            name = name[:_MAX_NAME]
    return name


def _suffix(name: str) -> str:
    stem, dot, ext = name.rpartition(".")
    return f".{ext.lower()}" if dot and stem else ""


def _stem(name: str) -> str:
    stem, dot, ext = name.rpartition(".")
    return stem if dot and stem else name


def _unsupported(ext: str) -> str:
    what = f"unsupported type '{ext}'" if ext else "no file extension"
    return f"{what} (supported: {_SUPPORTED_SHORT})"


def _refused(name: str, reason: str) -> Result:
    return [], Refusals.one(name, reason)


def load_bytes(filename: str, data: bytes, settings: IngestSettings) -> Result:
    """Parse one uploaded file (any supported type, zip included) into documents and refusals."""
    name = safe_filename(filename)
    try:
        return _load(name, bytes(data), settings, depth=0, archive=None)
    except MemoryError:
        return _refused(name, f"out of memory while parsing: over the {fmt_bytes(settings.parse_memory_bytes)} "
                              "limit (ingest.parse_memory_bytes; raise STRATA_PARSE_MEMORY_MB)")


def _load(name: str, data: bytes, settings: IngestSettings, depth: int, archive: _Archive | None) -> Result:
    ext = _suffix(name)
    if ext not in SUPPORTED_EXTENSIONS:
        return _refused(name, _unsupported(ext))
    if len(data) > settings.max_file_bytes:
        return _refused(name, _too_large(len(data), settings.max_file_bytes))
    if not data.strip():
        return _refused(name, "empty file")
    if ext == ".zip":
        return _load_zip(name, data, settings, depth, archive)
    try:
        result = _parse(ext, data, _stem(name), settings)
    except RefusedError as exc:
        return _refused(name, str(exc))
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - one bad file must never break an upload
        return _refused(name, f"could not read file: {type(exc).__name__}: {one_line(exc, 100)}")
    docs: list[LoadedDoc] = []
    refusals = Refusals()
    for problem in result.problems:
        refusals.add(name, problem)
    rows = ext in (".csv", ".tsv", ".jsonl", ".ndjson", ".json")
    for rec in result.records:
        if nonspace_count(rec.text) < settings.min_chars:
            if not rows:
                refusals.add(name, "empty: no text found")
            continue
        docs.append(LoadedDoc(rec.title, rec.text, name, _MIME[ext], rec.external_id, {"format": ext[1:], **rec.meta}))
    if rows and not docs and not refusals:
        refusals.add(name, "empty: no rows with text")
    return docs, refusals


def _parse(ext: str, data: bytes, stem: str, settings: IngestSettings) -> formats.ParseResult:
    if ext in (".txt", ".text"):
        return formats.parse_text(data, stem)
    if ext in (".md", ".markdown"):
        return formats.parse_markdown(data, stem)
    if ext in (".html", ".htm"):
        return formats.parse_html(data, stem)
    if ext == ".pdf":
        return formats.parse_pdf(data, stem, settings.max_pdf_pages)
    if ext == ".docx":
        return formats.parse_docx(data, stem, settings.max_docx_xml_bytes)
    if ext in (".csv", ".tsv"):
        return records.parse_csv(data, stem, settings.min_chars, "\t" if ext == ".tsv" else None,
                                 settings.max_table_rows)
    if ext in (".jsonl", ".ndjson"):
        return records.parse_jsonl(data, stem, settings.min_chars, settings.max_table_rows)
    if ext == ".json":
        return records.parse_json(data, stem, settings.min_chars, settings.max_table_rows)
    raise RefusedError(_unsupported(ext))


def _too_large(size: int, limit: int) -> str:
    return over_limit("too large", fmt_bytes(size), fmt_bytes(limit), "max_file_bytes")


def _skip_member(path: str) -> bool:
    parts = [p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in ("", "/")]
    return not parts or parts[0] == "__MACOSX" or any(p.startswith(".") and p not in (".", "..") for p in parts)


def _load_zip(name: str, data: bytes, settings: IngestSettings, depth: int, archive: _Archive | None) -> Result:
    if depth > _ZIP_DEPTH:
        return _refused(name, "archive nested too deep (one level of zip inside zip is allowed)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        return _refused(name, f"corrupt zip: {one_line(exc, 100)}")
    files = [i for i in infos if not i.is_dir()]
    if len(files) > settings.max_zip_members:
        return _refused(name, over_limit("too many members", f"{len(files):,}", f"{settings.max_zip_members:,}",
                                         "max_zip_members"))
    declared = sum(i.file_size for i in files)
    if declared > settings.max_zip_total_bytes:
        return _refused(name, over_limit("archive too large when unpacked", fmt_bytes(declared),
                                         fmt_bytes(settings.max_zip_total_bytes), "max_zip_total_bytes"))
    top = archive is None
    if archive is None:
        archive = _Archive(settings.max_zip_total_bytes, settings.max_archive_members)
    docs: list[LoadedDoc] = []
    refusals = Refusals()
    with zf:
        for info in files:
            if archive.members_left <= 0:  # the rest of the uploaded file is refused in one line, below
                archive.full = True
                break
            archive.members_left -= 1
            if _skip_member(info.filename):
                continue
            base = safe_filename(info.filename)
            member = f"{name}/{base}"
            ext = _suffix(base)
            if ext not in SUPPORTED_EXTENSIONS:  # counted, not kept: a zip of zips may hold a million of these
                refusals.add(member, _unsupported(ext))
                continue
            if info.file_size > settings.max_file_bytes:
                refusals.add(member, _too_large(info.file_size, settings.max_file_bytes))
                continue
            if archive.bytes_left <= 0:
                refusals.add(member, "skipped: archive exceeds its uncompressed size limit "
                                     "(ingest.max_zip_total_bytes; raise STRATA_MAX_ZIP_MB)")
                continue
            limit = min(settings.max_file_bytes, archive.bytes_left)
            try:
                content = _read_member(zf, info, limit)
            except _Overflow:
                if limit == archive.bytes_left:
                    archive.bytes_left = 0
                    refusals.add(member, "archive exceeds its uncompressed size limit, sizes misdeclared "
                                         "(ingest.max_zip_total_bytes; raise STRATA_MAX_ZIP_MB)")
                else:
                    refusals.add(member, over_limit("too large, size misdeclared", f"over {fmt_bytes(limit)}",
                                                    fmt_bytes(limit), "max_file_bytes"))
                continue
            except MemoryError:
                raise
            except RuntimeError as exc:  # encrypted member
                refusals.add(member, f"cannot read zip member: {one_line(exc, 80)}")
                continue
            except Exception as exc:  # noqa: BLE001 - bad CRC, unsupported compression, truncated data...
                refusals.add(member, f"corrupt zip member: {one_line(exc, 80)}")
                continue
            archive.bytes_left -= len(content)
            sub_docs, sub_refusals = _load(member, content, settings, depth + 1, archive)
            del content
            for d in sub_docs:
                d.meta.setdefault("archive", name)
                d.meta.setdefault("member_path", info.filename)
            docs.extend(sub_docs)
            refusals.merge(sub_refusals)
            if archive.full:
                break
    if top and archive.full:
        limit_n = f"{settings.max_archive_members:,}"
        refusals.add(name, over_limit("too many archive members (zips inside included), the rest not read",
                                      f"over {limit_n}", limit_n, "max_archive_members"))
    if not docs and not refusals and not archive.full:
        refusals.add(name, "empty archive: no files to load")
    return docs, refusals


class _Overflow(Exception):
    """A zip member unpacked to more bytes than allowed."""


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """Read a member, never holding more than `limit` + one chunk of it (declared sizes can lie)."""
    buf = io.BytesIO()
    with zf.open(info) as fh:
        while True:
            block = fh.read(_READ_CHUNK)
            if not block:
                break
            buf.write(block)
            if buf.tell() > limit:
                raise _Overflow
    return buf.getvalue()


def load_path(path: Path, settings: IngestSettings) -> Result:
    """Load a file, or every supported non-hidden file under a directory (sorted, recursive, symlinks not followed)."""
    path = Path(path)
    if path.is_dir():
        docs: list[LoadedDoc] = []
        refusals = Refusals()
        for root, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fname in sorted(filenames):
                if fname.startswith(".") or _suffix(fname) not in SUPPORTED_EXTENSIONS:
                    continue
                file_path = Path(root) / fname
                d, r = _load_file(file_path, settings)
                rel = file_path.relative_to(path).as_posix()
                for doc in d:
                    doc.meta.setdefault("path", rel)
                docs.extend(d)
                refusals.merge(r)
        return docs, refusals
    return _load_file(path, settings)


def _load_file(path: Path, settings: IngestSettings) -> Result:
    name = safe_filename(path.name)
    try:
        size = path.stat().st_size
        if not path.is_file():
            return _refused(name, "not a regular file")
        if size > settings.max_file_bytes:
            return _refused(name, _too_large(size, settings.max_file_bytes))
        data = path.read_bytes()
    except FileNotFoundError:
        return _refused(name, "file not found")
    except OSError as exc:
        return _refused(name, f"cannot read file: {one_line(exc.strerror or exc, 80)}")
    return load_bytes(path.name, data, settings)
