"""Limits a user can see and set (core/config.py IngestSettings, core/ingest/limits.py, core/ingest/isolate.py):
each refusal is one line naming the limit, the value found and the setting with its environment variable; uploads
are parsed in a child process with a time and a memory limit, so a file that runs too long, needs too much memory
or kills its parser is refused alone: the rest of the upload is stored and nothing stored before is lost."""

from __future__ import annotations

import io
import json
import threading
import time
import tomllib
import zipfile
from pathlib import Path

import psutil
import pytest

from core.config import IngestSettings, Settings
from core.ingest import load_bytes
from core.ingest.isolate import load_uploads
from core.workspace import ingest_uploads
from tests.unit.test_ingest import make_docx, make_pdf, make_zip

ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


def only_refusal(result) -> str:
    docs, refusals = result
    assert docs == [] and len(refusals) == 1, (docs, refusals)
    assert "\n" not in refusals[0].reason
    return refusals[0].reason


def test_every_limit_is_a_setting_with_its_environment_variable():
    env = {"STRATA_MAX_FILE_MB": "7", "STRATA_MAX_ZIP_MEMBERS": "9", "STRATA_MAX_ZIP_MB": "11",
           "STRATA_UPLOAD_BUDGET_MB": "13", "STRATA_MAX_DOCX_XML_MB": "17", "STRATA_MAX_TABLE_ROWS": "19",
           "STRATA_MAX_PDF_PAGES": "23", "STRATA_PARSE_TIMEOUT_S": "2.5", "STRATA_PARSE_MEMORY_MB": "512",
           "STRATA_PARSE_ISOLATE": "0"}
    ing = Settings.from_env(env).ingest
    assert (ing.max_file_bytes, ing.max_zip_members, ing.max_zip_total_bytes, ing.upload_budget_bytes,
            ing.max_docx_xml_bytes, ing.max_table_rows, ing.max_pdf_pages, ing.parse_timeout_s,
            ing.parse_memory_bytes, ing.isolate) == (7 * MB, 9, 11 * MB, 13 * MB, 17 * MB, 19, 23, 2.5, 512 * MB, False)
    assert Settings.from_env({}).ingest.isolate is True


def test_streamlit_upload_limit_agrees_with_the_upload_budget():
    """Streamlit refuses a file over server.maxUploadSize (MB) before Strata sees it: the two limits are one."""
    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert conf["server"]["maxUploadSize"] * MB == IngestSettings().upload_budget_bytes
    assert IngestSettings().max_file_bytes <= IngestSettings().upload_budget_bytes
    assert conf["client"]["showErrorDetails"] in ("none", "type")  # no traceback for users


def _bomb_docx(unpacked: int) -> bytes:
    """A real DOCX with one more part of `unpacked` zeros, deflated to about a thousandth of that."""
    buf = io.BytesIO(make_docx())
    with zipfile.ZipFile(buf, "a", zipfile.ZIP_DEFLATED) as zf, zf.open("customXml/item9.xml", "w") as fh:
        block = b"\0" * MB
        for _ in range(unpacked // MB):
            fh.write(block)
    return buf.getvalue()


def test_docx_decompression_bomb_is_refused_by_its_setting():
    data = _bomb_docx(120 * MB)
    assert len(data) < MB  # a small upload that unpacks to 120 MB
    reason = only_refusal(load_bytes("bomb.docx", data, IngestSettings()))
    assert reason.startswith("DOCX too large when unpacked: 120."), reason  # the bomb and the real parts
    assert reason.endswith(" MB > 100 MB limit (ingest.max_docx_xml_bytes; raise STRATA_MAX_DOCX_XML_MB)"), reason


def test_table_rows_over_the_cap_are_refused():
    s = IngestSettings(max_table_rows=10)
    rows = "title,text\n" + "".join(f"t{i},text of row {i}\n" for i in range(11))
    assert only_refusal(load_bytes("rows.csv", rows.encode(), s)) == (
        "too many rows: more than 10 > 10 limit (ingest.max_table_rows; raise STRATA_MAX_TABLE_ROWS)")
    lines = "".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(12))
    assert only_refusal(load_bytes("rows.jsonl", lines.encode(), s)) == (
        "too many lines: 12 > 10 limit (ingest.max_table_rows; raise STRATA_MAX_TABLE_ROWS)")
    items = json.dumps([{"text": f"item {i}"} for i in range(11)])
    assert "STRATA_MAX_TABLE_ROWS" in only_refusal(load_bytes("rows.json", items.encode(), s))
    ok, refusals = load_bytes("rows.csv", rows.encode(), IngestSettings(max_table_rows=11))
    assert len(ok) == 11 and refusals == []


def test_pdf_over_the_page_cap_is_refused():
    data = make_pdf([[f"Page {i} text"] for i in range(4)])
    assert only_refusal(load_bytes("long.pdf", data, IngestSettings(max_pdf_pages=3))) == (
        "too many PDF pages: 4 > 3 limit (ingest.max_pdf_pages; raise STRATA_MAX_PDF_PAGES)")
    docs, _ = load_bytes("long.pdf", data, IngestSettings(max_pdf_pages=4))
    assert docs[0].meta["pages"] == 4


def test_the_older_limits_name_their_settings_too():
    s = IngestSettings(max_zip_members=2, max_zip_total_bytes=1000)
    assert only_refusal(load_bytes("big.txt", b"x" * 101, IngestSettings(max_file_bytes=100))) == (
        "too large: 101 bytes > 100 bytes limit (ingest.max_file_bytes; raise STRATA_MAX_FILE_MB)")
    three = make_zip({"a.txt": b"a", "b.txt": b"b", "c.txt": b"c"})
    assert only_refusal(load_bytes("m.zip", three, s)) == (
        "too many members: 3 > 2 limit (ingest.max_zip_members; raise STRATA_MAX_ZIP_MEMBERS)")
    big = make_zip({"a.txt": b"a" * 90, "b.txt": b"b" * 990})
    assert only_refusal(load_bytes("t.zip", big, s)) == ("archive too large when unpacked: 1.1 KB > 1000 bytes "
                                                         "limit (ingest.max_zip_total_bytes; raise STRATA_MAX_ZIP_MB)")


def test_files_past_the_upload_budget_are_refused_unread():
    s = IngestSettings(upload_budget_bytes=3000)
    files = [("a.txt", b"alpha " * 300), ("b.txt", b"beta " * 300), ("c.txt", b"gamma")]  # 1800 + 1500 + 5 bytes
    (a, ra), (b, rb), (c, rc) = load_uploads(files, s)
    assert [d.title for d in a + c] == ["a", "c"] and ra == rc == [] and b == []
    assert [r.reason for r in rb] == ["upload over its budget: 3.2 KB with this file > 2.9 KB limit "
                                      "(ingest.upload_budget_bytes; raise STRATA_UPLOAD_BUDGET_MB)"]


# ---------------------------------------------------------------------------------- the parsing process
def _slow_markdown() -> bytes:
    """About 4 s of Markdown parsing on this machine (over 3 MB of emphasis and links)."""
    block = "# Title\n\n" + "Some *emphasis* and [a link](http://x) here. " * 20 + "\n\n"
    return (block * 4000).encode()


def _home_with_one_document(tmp_path, make_settings):
    settings = make_settings(tmp_path / "home")
    from core.store import Store

    store = Store(settings.storage.db_url)
    ws = store.create_workspace("limits")
    first = ingest_uploads(store, ws, [("kept.txt", b"Stored before the hostile upload.")], settings)
    assert first.added == ["kept"]
    return settings, store, ws


def _titles(store, ws) -> set[str]:
    return {d.title for d in store.documents(ws.id)}


def test_a_parse_over_the_time_limit_is_refused_and_the_rest_stored(tmp_path, make_settings):
    settings, store, ws = _home_with_one_document(tmp_path, make_settings)
    settings.ingest.parse_timeout_s = 0.5
    t0 = time.monotonic()
    report = ingest_uploads(store, ws, [("before.txt", b"A file before the slow one."),
                                        ("slow.md", _slow_markdown()),
                                        ("after.txt", b"A file after the slow one.")], settings)
    assert time.monotonic() - t0 < 3.5, "the slow parse was stopped at its limit"
    assert [(r.filename, r.reason) for r in report.refusals] == [
        ("slow.md", "parsing took too long: over 0.5 s > 0.5 s limit (ingest.parse_timeout_s; raise "
                    "STRATA_PARSE_TIMEOUT_S)")]
    assert _titles(store, ws) == {"kept", "before", "after"}


def test_a_zip_bomb_past_the_memory_limit_is_refused_and_the_rest_stored(tmp_path, make_settings):
    settings, store, ws = _home_with_one_document(tmp_path, make_settings)
    big = 1024 * MB
    settings.ingest = settings.ingest.model_copy(update={"max_file_bytes": big, "max_zip_total_bytes": big,
                                                         "parse_memory_bytes": 300 * MB})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("huge.txt", "w") as fh:
        for _ in range(400):
            fh.write(b"a" * MB)
    before = psutil.Process().memory_info().rss
    report = ingest_uploads(store, ws, [("bomb.zip", buf.getvalue()), ("after.txt", b"Stored after the bomb.")],
                            settings)
    grown = psutil.Process().memory_info().rss - before
    assert len(report.refusals) == 1, report.refusals
    reason = report.refusals[0].reason
    assert "300 MB limit (ingest.parse_memory_bytes; raise STRATA_PARSE_MEMORY_MB)" in reason, reason
    assert _titles(store, ws) == {"kept", "after"}
    assert grown < 200 * MB, grown  # the app's own process never unpacked it (the pytest process may be large)


def test_a_parser_that_dies_loses_only_its_file(tmp_path, make_settings):
    """The parsing process killed mid-file (as the kernel's OOM killer or a crashing parser would end it)."""
    settings, store, ws = _home_with_one_document(tmp_path, make_settings)
    killed: list[int] = []

    def kill_the_parser() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for child in psutil.Process().children():
                if "core.ingest.isolate" in " ".join(child.cmdline()) and child.cpu_times().user > 1.5:
                    child.kill()
                    killed.append(child.pid)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_parser, daemon=True)
    killer.start()
    report = ingest_uploads(store, ws, [("before.txt", b"A file before the crash."), ("crash.md", _slow_markdown()),
                                        ("after.txt", b"A file after the crash.")], settings)
    killer.join()
    assert killed
    [refusal] = report.refusals
    assert refusal.filename == "crash.md"
    assert refusal.reason.startswith("the parser crashed (signal 9)"), refusal.reason
    assert "STRATA_PARSE_MEMORY_MB" in refusal.reason
    assert _titles(store, ws) == {"kept", "before", "after"}


@pytest.mark.parametrize("isolate", [True, False])
def test_the_same_documents_whether_isolated_or_not(isolate):
    files = [(p.name, p.read_bytes()) for p in sorted((ROOT / "data" / "sample").iterdir()) if p.is_file()]
    files.append(("bad.pdf", b"%PDF-1.4 not really"))
    out = load_uploads(files, IngestSettings(isolate=isolate))
    reference = [load_bytes(n, d, IngestSettings()) for n, d in files]
    assert out == reference
    assert sum(len(d) for d, _ in out) == len(files) - 1
