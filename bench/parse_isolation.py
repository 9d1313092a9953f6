"""Time of an upload parsed in the app's process (`ingest.isolate` off: what uploads did before issue 24) and in a
child process with the time and memory limits (core/ingest/isolate.py), into a fresh SQLite home each time:
the bundled sample (15 files) and a 200-file upload (txt, md, html, csv, pdf and docx, 2-3 KB each).

    python -m bench.parse_isolation [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.machine import commit, machine
from core.config import Settings
from core.store import Store
from core.workspace import ingest_uploads
from tests.unit.test_ingest import make_pdf

ROOT = Path(__file__).resolve().parents[1]


def _docx(text: str) -> bytes:
    import io

    import docx

    d = docx.Document()
    d.add_paragraph(text)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def sample_files() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted((ROOT / "data" / "sample").iterdir()) if p.is_file()]


def upload_200() -> list[tuple[str, bytes]]:
    texts = [b.decode() for _, b in sample_files()]
    files = []
    for i in range(200):
        text = f"Upload file {i}. " + texts[i % len(texts)][:2500]
        kind = ("txt", "md", "html", "csv", "pdf", "docx")[i % 6]
        if kind == "csv":
            data = ("title,text\n" + "".join(f"row {i}-{j},\"{line}\"\n" for j, line in
                                              enumerate(text.replace('"', "'").split(". ")) if line)).encode()
        elif kind == "html":
            data = f"<html><head><title>File {i}</title></head><body><p>{text}</p></body></html>".encode()
        elif kind == "pdf":
            data = make_pdf([[line[:90] for line in text.split(". ")[:30]]])
        elif kind == "docx":
            data = _docx(text)
        else:
            data = text.encode()
        files.append((f"f{i:03d}.{kind}", data))
    return files


def once(files: list[tuple[str, bytes]], isolate: bool) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as home:
        s = Settings()
        s.storage.home = Path(home)
        s.ingest.isolate = isolate
        store = Store(s.storage.db_url)
        ws = store.create_workspace("bench")
        t0 = time.perf_counter()
        report = ingest_uploads(store, ws, files, s)
        seconds = time.perf_counter() - t0
        store.engine.dispose()
    return seconds, len(report.added)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{machine()} · commit {commit()} · median of {args.repeat}")
    for label, files in (("sample (15 files)", sample_files()), ("200-file upload", upload_200())):
        for isolate in (False, True):
            runs = [once(files, isolate) for _ in range(args.repeat)]
            med = statistics.median(r[0] for r in runs)
            print(f"{label:18} {'child process' if isolate else 'in process':13} {med:6.3f} s  "
                  f"({runs[0][1]} documents)")


if __name__ == "__main__":
    main()
