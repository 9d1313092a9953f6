"""Loaders: every supported format from real bytes, and every way a file can be refused."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from core.config import IngestSettings
from core.ingest import SUPPORTED_EXTENSIONS, LoadedDoc, Refusal, load_bytes, load_path, safe_filename

HOTPOT = Path("/work/shared/eval/hotpotqa/corpus.jsonl")


@pytest.fixture
def settings() -> IngestSettings:
    return IngestSettings()


# ------------------------------------------------------------------------------------------------------ helpers
def _pdf_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A minimal valid PDF, one content stream of Helvetica text lines per page, with a correct xref table."""
    n = len(pages)
    font_id = 3 + 2 * n
    objs: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(f"{3 + 2 * i} 0 R".encode() for i in range(n)) + f"] /Count {n} >>".encode(),
    ]
    for i, lines in enumerate(pages):
        content = "BT /F1 12 Tf 14 TL 72 720 Td " + " ".join(f"({_pdf_escape(line)}) Tj T*" for line in lines) + " ET"
        stream = content.encode("latin-1")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objs.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info_ref = b""
    if title is not None:
        objs.append(f"<< /Title ({_pdf_escape(title)}) >>".encode("latin-1"))
        info_ref = f" /Info {len(objs)} 0 R".encode()
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for num, body in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{num} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R{info_ref.decode()} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def make_docx(title: str | None = "Quarterly Report") -> bytes:
    import docx

    d = docx.Document()
    if title:
        d.core_properties.title = title
    d.add_heading("Introduction Heading", level=1)
    d.add_paragraph("The first paragraph talks about apples.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Fruit"
    table.cell(0, 1).text = "Colour"
    table.cell(1, 0).text = "Banana"
    table.cell(1, 1).text = "Yellow"
    d.add_paragraph("The closing paragraph mentions pears.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def make_zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            if name.endswith("/"):
                zf.writestr(zipfile.ZipInfo(name), b"")
            else:
                zf.writestr(name, data)
    return buf.getvalue()


def binary_blob(n: int = 4096) -> bytes:
    rng = __import__("random").Random(7)
    data = bytearray(rng.randrange(256) for _ in range(n))
    data[10] = 0
    data[500] = 0
    return bytes(data)


def one(docs: list[LoadedDoc], refusals: list[Refusal]) -> LoadedDoc:
    assert refusals == [], refusals
    assert len(docs) == 1, docs
    return docs[0]


def refused(docs: list[LoadedDoc], refusals: list[Refusal]) -> Refusal:
    assert docs == [], docs
    assert len(refusals) == 1, refusals
    return refusals[0]


# --------------------------------------------------------------------------------------------------- plain text
def test_plain_utf8_text(settings):
    doc = one(*load_bytes("notes.txt", "Hello wörld\r\nsecond line\rthird".encode(), settings))
    assert doc.text == "Hello wörld\nsecond line\nthird"
    assert doc.title == "notes"
    assert doc.filename == "notes.txt"
    assert doc.mime == "text/plain"
    assert doc.external_id is None


def test_extension_is_case_insensitive(settings):
    doc = one(*load_bytes("LOUD.TXT", b"shouting text", settings))
    assert doc.text == "shouting text"


def test_utf8_bom_is_stripped(settings):
    doc = one(*load_bytes("bom.txt", b"\xef\xbb\xbf" + "Ünïcode text".encode(), settings))
    assert doc.text == "Ünïcode text"
    assert not doc.text.startswith("\ufeff")


def test_utf16_with_bom(settings):
    data = "\ufeffDas ist ein Über-Test.\r\nZweite Zeile".encode("utf-16-le")
    assert data[:2] == b"\xff\xfe"
    doc = one(*load_bytes("utf16.txt", data, settings))
    assert doc.text == "Das ist ein Über-Test.\nZweite Zeile"


def test_utf16_big_endian_with_bom(settings):
    doc = one(*load_bytes("be.txt", "\ufeffbig endian ü".encode("utf-16-be"), settings))
    assert doc.text == "big endian ü"


def test_latin1_text_falls_back(settings, tmp_path):
    path = tmp_path / "legacy.txt"
    path.write_bytes("Café crème, naïve façade — señor".encode("cp1252"))
    doc = one(*load_path(path, settings))
    assert doc.text == "Café crème, naïve façade — señor"
    assert doc.meta["encoding"] in ("cp1252", "latin-1")


def test_pure_latin1_bytes_undefined_in_cp1252(settings):
    data = "abc ".encode() + bytes([0x81, 0xE9]) + b" def"  # 0x81 has no cp1252 mapping
    doc = one(*load_bytes("odd.txt", data, settings))
    assert doc.text == "abc \x81é def"


def test_binary_content_is_refused(settings, tmp_path):
    path = tmp_path / "random.txt"
    path.write_bytes(binary_blob())
    r = refused(*load_path(path, settings))
    assert r.filename == "random.txt"
    assert "binary" in r.reason


def test_control_heavy_bytes_without_nul_are_refused(settings):
    data = bytes(range(1, 32)) * 50 + b"a few letters"
    assert b"\x00" not in data
    assert "binary" in refused(*load_bytes("ctl.md", data, settings)).reason


@pytest.mark.parametrize("data", [b"", b"   \n\t \r\n"])
def test_empty_file_is_refused(settings, data):
    r = refused(*load_bytes("empty.txt", data, settings))
    assert r.reason.startswith("empty")


def test_min_chars_applies(settings):
    s = settings.model_copy(update={"min_chars": 5})
    assert refused(*load_bytes("tiny.txt", b"  ab c  ", s)).reason.startswith("empty")
    assert one(*load_bytes("ok.txt", b"abcde", s)).text == "abcde"


def test_oversized_file_refused_before_parsing(settings, tmp_path):
    small = settings.model_copy(update={"max_file_bytes": 100})
    r = refused(*load_bytes("big.txt", b"x" * 101, small))
    assert r.reason == "too large: 101 bytes > 100 bytes limit (ingest.max_file_bytes; raise STRATA_MAX_FILE_MB)"
    # A corrupt PDF over the limit is refused for its size, i.e. it is never parsed.
    assert refused(*load_bytes("big.pdf", b"junk" * 100, small)).reason.startswith("too large")
    path = tmp_path / "big.md"
    path.write_bytes(b"y" * 5000)
    assert refused(*load_path(path, small)).reason.startswith("too large: 4.9 KB > 100 bytes")
    assert one(*load_bytes("fits.txt", b"x" * 100, small)).text == "x" * 100


def test_size_message_in_megabytes(settings):
    s = settings.model_copy(update={"max_file_bytes": 50 * 1024 * 1024})
    r = refused(*load_bytes("huge.txt", b"a" * (50 * 1024 * 1024 + 600_000), s))
    assert r.reason == "too large: 50.6 MB > 50 MB limit (ingest.max_file_bytes; raise STRATA_MAX_FILE_MB)"


def test_unsupported_extension(settings):
    r = refused(*load_bytes("setup.EXE", b"MZ\x90\x00", settings))
    assert r.reason == "unsupported type '.exe' (supported: txt, md, html, pdf, docx, csv, jsonl, zip)"
    assert "no file extension" in refused(*load_bytes("README", b"text", settings)).reason


def test_supported_extensions_cover_the_formats():
    for ext in (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx", ".csv", ".jsonl", ".zip"):
        assert ext in SUPPORTED_EXTENSIONS
    assert all(e.startswith(".") and e == e.lower() for e in SUPPORTED_EXTENSIONS)


# ---------------------------------------------------------------------------------------------------- filenames
def test_hostile_filename_is_sanitized(settings):
    doc = one(*load_bytes("../../evil\x00name.txt", b"payload text", settings))
    assert doc.filename == "evilname.txt"
    assert doc.title == "evilname"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\windows\\system.ini", "system.ini"),
        ("/abs/path/report.pdf", "report.pdf"),
        ("日本語のファイル.txt", "日本語のファイル.txt"),
        ("naïve résumé.md", "naïve résumé.md"),
        ("tab\there\nnewline.txt", "tabherenewline.txt"),
        ("\u202egnp.exe", "gnp.exe"),
        ("..", "unnamed"),
        ("", "unnamed"),
        ("dir/", "dir"),
        ('a<b>c:"d|e?f*.txt', "a_b_c__d_e_f_.txt"),
    ],
)
def test_safe_filename(raw, expected):
    assert safe_filename(raw) == expected


def test_safe_filename_length_keeps_extension():
    name = safe_filename("ä" * 500 + ".markdown")
    assert len(name) == 200
    assert name.endswith(".markdown")
    assert "/" not in safe_filename("a/" * 300 + "b.txt")


# ------------------------------------------------------------------------------------------------ markdown / html
def test_markdown_title_from_first_h1(settings):
    md = "Some preface.\n\n## Not this\n\n# The Real Title #\n\nBody text here.\n"
    doc = one(*load_bytes("guide.md", md.encode(), settings))
    assert doc.title == "The Real Title"
    assert doc.text == "Some preface.\n\n## Not this\n\n# The Real Title\n\nBody text here."  # closing #s dropped
    assert doc.mime == "text/markdown"
    assert one(*load_bytes("plain.markdown", b"no heading at all", settings)).title == "plain"
    assert one(*load_bytes("setext.md", b"The Title\n=========\n\nBody text here.", settings)).title == "The Title"
    # a '#' line inside a code block is code, not a heading
    assert one(*load_bytes("code.md", b"```\n# not a title\n```\n\nBody text.", settings)).title == "code"


CANAL_MD = """# The Harbour <em>Canal</em> Company

The <b>Harbour Canal Company</b> was founded in 1821 by Ellen Marsh &amp; Daniel Okoye in Port&nbsp;Halden.
It dug the **Meren Cut** and ran _barges_ to [Tollmere](https://example.org/tollmere "Tollmere page") until 1902.

> Tomas Reyes wrote that the canal &ldquo;made the town&rdquo;.
> He sold his shares to the Meridian Trust in 1890.

Its directors were:

- Ellen Marsh, chair
- Daniel Okoye, engineer

1. The Meren Cut opened in 1824.
2. The Tollmere basin opened in 1830.

<div class="note">Ships paid a toll to the <i>Harbour Board</i>.<!-- draft --></div>

| lock | place |
|---|---|
| 1 | Halden Narrows |

Run `canal --open` to see the locks:

```
lock 1: Halden Narrows
```

Upper Basin
-----------

Line one<br>line two, and a hard\\
break.
"""


def test_markdown_is_read_as_rendered(settings, tmp_path):
    """Tags dropped, entities decoded, quote and list markers, emphasis and link markup gone (link text kept, URL
    dropped), headings kept as heading lines, code kept as text: the text a reader of the page sees."""
    (tmp_path / "canal.md").write_text(CANAL_MD, encoding="utf-8")
    doc = one(*load_path(tmp_path / "canal.md", settings))
    assert doc.title == "The Harbour Canal Company"
    assert doc.meta["title_from"] == "heading"
    assert doc.text == (
        "# The Harbour Canal Company\n\n"
        "The Harbour Canal Company was founded in 1821 by Ellen Marsh & Daniel Okoye in Port Halden. It dug the Meren "
        "Cut and ran barges to Tollmere until 1902.\n\n"
        "Tomas Reyes wrote that the canal \u201cmade the town\u201d. He sold his shares to the Meridian Trust in 1890.\n\n"
        "Its directors were:\n\n"
        "Ellen Marsh, chair\n\n"
        "Daniel Okoye, engineer\n\n"
        "The Meren Cut opened in 1824.\n\n"
        "The Tollmere basin opened in 1830.\n\n"
        "Ships paid a toll to the Harbour Board.\n\n"
        "lock | place\n\n"
        "1 | Halden Narrows\n\n"
        "Run canal --open to see the locks:\n\n"
        "lock 1: Halden Narrows\n\n"
        "## Upper Basin\n\n"
        "Line one\nline two, and a hard\nbreak.")


def test_markdown_names_come_out_clean(settings):
    """Extraction from a Markdown file loaded by the real loader names "Harbour Canal Company", not "Harbour Canal
    Company</b>", "> Tomas Reyes" or "Port&nbsp;Halden"."""
    from core.backends.offline import OfflineBackend
    from core.config import ExtractSettings

    doc = one(*load_bytes("canal.md", CANAL_MD.encode(), settings))
    for extractor in ("spacy", "heuristic"):
        ex = OfflineBackend(extractor=extractor).extract(doc.text, ExtractSettings().entity_types, subject=doc.title)
        names = {e.name for e in ex.entities}
        assert {"Harbour Canal Company", "Tomas Reyes", "Port Halden", "Meridian Trust"} <= names, (extractor, names)
        dirty = [n for n in names if any(m in n for m in ("<", ">", "&", "*", "_", "[", "](", "http", "Tollmere page"))]
        assert not dirty, (extractor, dirty)


def test_a_title_says_where_it_came_from(settings):
    """Only a title the document gives itself may name its subject: a row's title field, a Markdown heading, an HTML
    title; a title made from the file name (plain text, an untitled row, a page without a heading) may not."""
    def source(name: str, data: bytes) -> list[tuple[str, str]]:
        docs, _ = load_bytes(name, data, settings)
        return [(d.title, d.meta["title_from"]) for d in docs]

    assert source("guide.md", b"# The Real Title\n\nBody text here.") == [("The Real Title", "heading")]
    assert source("plain.md", b"no heading at all, only text") == [("plain", "filename")]
    assert source("page.html", b"<html><body><h1>Main</h1><p>Body text here.</p></body></html>") == [("Main", "html")]
    assert source("page.html", b"<html><body><p>Body text here.</p></body></html>") == [("page", "filename")]
    assert source("book.txt", b"A long book. It has many chapters.") == [("book", "filename")]
    rows = [{"title": "Ada Lovelace", "text": "Ada Lovelace wrote notes."}, {"text": "An untitled row of text."}]
    jsonl = "\n".join(json.dumps(r) for r in rows).encode()
    assert source("c.jsonl", jsonl) == [("Ada Lovelace", "field"), ("c #2", "filename")]
    assert source("c.csv", b"title,text\nAda Lovelace,Ada Lovelace wrote notes.\n,An untitled row of text.\n") \
        == [("Ada Lovelace", "field"), ("c #2", "filename")]


def test_html_strips_script_style_nav(settings):
    html = """<!doctype html><html><head><title>  My   Page </title>
    <style>body { color: red; }</style><script>var SECRET = "leak";</script></head>
    <body><nav><a href="/">Home menu</a></nav>
    <h1>Main heading</h1>
    <p>First paragraph
       spans lines.</p>
    <div>Second<br>line two</div>
    <script>document.write("LEAKED")</script>
    <!-- hidden comment -->
    <ul><li>one</li><li>two</li></ul>
    </body></html>"""
    doc = one(*load_bytes("page.HTML", html.encode(), settings))
    assert doc.title == "My Page"
    assert "SECRET" not in doc.text and "LEAKED" not in doc.text and "leak" not in doc.text
    assert "color" not in doc.text
    assert "Home menu" not in doc.text
    assert "hidden comment" not in doc.text
    assert doc.text == "Main heading\n\nFirst paragraph spans lines.\n\nSecond\nline two\n\none\n\ntwo"
    assert doc.mime == "text/html"


def test_html_declared_charset_and_fallback_title(settings):
    html = '<html><head><meta charset="windows-1252"></head><body><h1>Caf\xe9 news</h1><p>d\xe9j\xe0 vu</p></body></html>'
    doc = one(*load_bytes("news.htm", html.encode("cp1252"), settings))
    assert doc.title == "Café news"
    assert "déjà vu" in doc.text


def test_html_without_text_is_refused(settings):
    r = refused(*load_bytes("blank.html", b"<html><body><script>x()</script></body></html>", settings))
    assert r.reason.startswith("empty")


# ----------------------------------------------------------------------------------------------------------- PDF
def test_pdf_text_is_extracted(settings, tmp_path):
    data = make_pdf([["Hello PDF world", "Second line (with parens)"], ["Page two text"]], title="Doc Title")
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    doc = one(*load_path(path, settings))
    assert "Hello PDF world" in doc.text
    assert "Second line (with parens)" in doc.text
    assert "Page two text" in doc.text
    assert doc.text.index("Hello") < doc.text.index("Page two")
    assert "\n\n" in doc.text  # pages joined by a blank line
    assert doc.meta["pages"] == 2
    assert doc.title == "Doc Title"
    assert doc.mime == "application/pdf"


def test_pdf_title_falls_back_to_stem(settings):
    doc = one(*load_bytes("scan_001.pdf", make_pdf([["Some words"]]), settings))
    assert doc.title == "scan_001"
    assert doc.meta["pages"] == 1


def test_pdf_without_text_is_refused(settings):
    r = refused(*load_bytes("scanned.pdf", make_pdf([[]]), settings))
    assert r.reason == "no extractable text (scanned PDF?)"


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer garbage",
        b"this is not a pdf at all",
        make_pdf([["Truncated document"]])[:60],
    ],
)
def test_corrupt_pdf_is_refused(settings, data):
    r = refused(*load_bytes("broken.pdf", data, settings))
    assert r.reason.startswith("corrupt PDF") or r.reason.startswith("no extractable text")
    assert "\n" not in r.reason


def test_encrypted_pdf_is_refused(settings):
    from pypdf import PdfWriter

    w = PdfWriter()
    w.add_blank_page(200, 200)
    w.encrypt("secret-password", algorithm="RC4-128")
    buf = io.BytesIO()
    w.write(buf)
    r = refused(*load_bytes("locked.pdf", buf.getvalue(), settings))
    assert r.reason.startswith("encrypted PDF")


# ---------------------------------------------------------------------------------------------------------- DOCX
def test_docx_paragraphs_and_tables(settings, tmp_path):
    path = tmp_path / "report.docx"
    path.write_bytes(make_docx())
    doc = one(*load_path(path, settings))
    assert doc.title == "Quarterly Report"
    assert doc.text.startswith("Introduction Heading\n\nThe first paragraph talks about apples.")
    assert "Fruit | Colour" in doc.text and "Banana | Yellow" in doc.text
    assert doc.text.index("apples") < doc.text.index("Banana") < doc.text.index("pears")
    assert doc.mime.endswith("wordprocessingml.document")


def test_docx_title_from_heading(settings):
    doc = one(*load_bytes("memo.docx", make_docx(title=None), settings))
    assert doc.title == "Introduction Heading"


def test_corrupt_docx_is_refused(settings):
    r = refused(*load_bytes("bad.docx", b"PK\x03\x04 definitely not a docx", settings))
    assert r.reason.startswith("corrupt DOCX")
    r = refused(*load_bytes("notdocx.docx", make_zip({"hello.txt": b"hi"}), settings))
    assert r.reason.startswith("corrupt DOCX")


# ----------------------------------------------------------------------------------------------------- CSV / JSONL
def test_csv_rows_with_id_title_text(settings, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(
        'ID,Title,Text,extra\n7,First,"Row one text, with a comma",x\n8,,"Row two\nspans lines",y\n'
        "9,Third,   ,z\n10,Fourth,Row four text,w\n",
        encoding="utf-8",
    )
    docs, refusals = load_path(path, settings)
    assert [d.external_id for d in docs] == ["7", "8", "10"]
    assert [d.title for d in docs] == ["First", "data #2", "Fourth"]
    assert docs[0].text == "Row one text, with a comma"
    assert docs[1].text == "Row two\nspans lines"
    assert all(d.filename == "data.csv" and d.mime == "text/csv" for d in docs)
    assert refusals == [Refusal("data.csv", "1 row without text skipped (row 3)")]


def test_csv_text_column_by_longest_average(settings):
    rows = ["code;label;description"] + [f"{i};L{i};" + "a long description of item number " * 3 + str(i) for i in range(4)]
    docs, refusals = load_bytes("items.csv", "\n".join(rows).encode(), settings)
    assert refusals == []
    assert len(docs) == 4
    assert docs[2].text.endswith("item number 2")
    assert docs[2].title == "items #3"


def test_csv_huge_field_and_many_empty_rows(settings):
    big = "word " * 40_000  # larger than the csv module's default 128 KB field limit
    text = "id,text\n" + f'1,"{big}"\n' + "".join(f"{i},\n" for i in range(2, 9)) + "\n,\n"  # blank rows: silent
    docs, refusals = load_bytes("big.csv", text.encode(), settings)
    assert len(docs) == 1 and docs[0].text == big.strip() and docs[0].external_id == "1"
    assert refusals == [Refusal("big.csv", "7 rows without text skipped (rows 2, 3, 4, 5, 6, …)")]


def test_jsonl_with_malformed_line(settings):
    lines = [
        json.dumps({"id": 1, "title": "Alpha", "text": "Alpha text."}),
        '{"id": 2, "title": "Broken", "text": ',
        "",
        json.dumps({"doc_id": "b-3", "content": "Content field text."}),
        "[1, 2, 3]",
        json.dumps({"id": 4, "title": "No text"}),
        json.dumps({"id": 5, "Title": "Case", "Body": "Body field text.", "extra": {"x": 1}}),
    ]
    docs, refusals = load_bytes("records.jsonl", "\n".join(lines).encode(), settings)
    assert [(d.external_id, d.title, d.text) for d in docs] == [
        ("1", "Alpha", "Alpha text."),
        ("b-3", "records #4", "Content field text."),
        ("5", "Case", "Body field text."),
    ]
    assert Refusal("records.jsonl", "2 malformed lines skipped (lines 2, 5)") in refusals
    assert Refusal("records.jsonl", "1 line without text skipped (line 6)") in refusals
    assert len(refusals) == 2


def test_jsonl_title_not_prepended(settings):
    line = json.dumps({"id": 0, "title": "Jeff Porcaro", "text": "An American drummer."})
    doc = one(*load_bytes("c.ndjson", line.encode(), settings))
    assert doc.text == "An American drummer."
    assert doc.title == "Jeff Porcaro"
    assert doc.external_id == "0"


def test_json_array(settings):
    data = json.dumps([{"id": 3, "text": "first"}, {"text": "second", "title": "Two"}]).encode()
    docs, refusals = load_bytes("arr.json", data, settings)
    assert refusals == []
    assert [(d.external_id, d.title, d.text) for d in docs] == [("3", "arr #1", "first"), (None, "Two", "second")]


@pytest.mark.skipif(not HOTPOT.exists(), reason="eval corpus not present")
def test_hotpotqa_corpus_loads(settings):
    docs, refusals = load_path(HOTPOT, settings)
    assert refusals == []
    assert len(docs) == 1971
    assert [d.external_id for d in docs] == [str(i) for i in range(1971)]
    first = json.loads(HOTPOT.open(encoding="utf-8").readline())
    assert docs[0].title == first["title"]
    assert docs[0].text == first["text"]
    assert all(d.filename == "corpus.jsonl" for d in docs)


# ------------------------------------------------------------------------------------------------------------ zip
def test_zip_with_good_and_bad_members(settings, tmp_path):
    inner = make_zip({"inner/deep.md": b"# Deep Title\n\nNested markdown body."})
    data = make_zip(
        {
            "docs/": b"",
            "docs/good.txt": b"A good text member.",
            "docs/page.html": b"<html><head><title>Zipped</title></head><body><p>Zipped page.</p></body></html>",
            "docs/report.pdf": make_pdf([["Zipped PDF text"]]),
            "docs/broken.pdf": b"%PDF-1.7 this is broken",
            "noise.bin": b"\x00\x01",
            "binary.txt": binary_blob(),
            "empty.md": b"",
            "__MACOSX/docs/._good.txt": b"\x00\x05\x16\x07resource fork",
            ".DS_Store": b"\x00\x00\x00\x01Bud1",
            "docs/.hidden.txt": b"should be skipped",
            "nested.zip": inner,
        }
    )
    path = tmp_path / "archive.zip"
    path.write_bytes(data)
    docs, refusals = load_path(path, settings)
    by_name = {d.filename: d for d in docs}
    assert set(by_name) == {
        "archive.zip/good.txt",
        "archive.zip/page.html",
        "archive.zip/report.pdf",
        "archive.zip/nested.zip/deep.md",
    }
    assert by_name["archive.zip/good.txt"].text == "A good text member."
    assert by_name["archive.zip/page.html"].title == "Zipped"
    assert "Zipped PDF text" in by_name["archive.zip/report.pdf"].text
    assert by_name["archive.zip/nested.zip/deep.md"].title == "Deep Title"
    assert by_name["archive.zip/good.txt"].meta["member_path"] == "docs/good.txt"
    reasons = {r.filename: r.reason for r in refusals}
    assert set(reasons) == {
        "archive.zip/broken.pdf",
        "archive.zip/noise.bin",
        "archive.zip/binary.txt",
        "archive.zip/empty.md",
    }
    assert reasons["archive.zip/broken.pdf"].startswith("corrupt PDF")
    assert reasons["archive.zip/noise.bin"].startswith("unsupported type '.bin'")
    assert "binary" in reasons["archive.zip/binary.txt"]
    assert reasons["archive.zip/empty.md"] == "empty file"


def test_zip_nested_too_deep(settings):
    level2 = make_zip({"deepest.txt": b"too deep"})
    level1 = make_zip({"l2.zip": level2, "ok.txt": b"one level down"})
    docs, refusals = load_bytes("outer.zip", make_zip({"l1.zip": level1}), settings)
    assert [d.filename for d in docs] == ["outer.zip/l1.zip/ok.txt"]
    assert [r.filename for r in refusals] == ["outer.zip/l1.zip/l2.zip"]
    assert "nested" in refusals[0].reason


def test_corrupt_zip(settings):
    assert refused(*load_bytes("bad.zip", b"PK\x03\x04garbage", settings)).reason.startswith("corrupt zip")
    good = make_zip({"a.txt": b"alpha text", "b.txt": b"beta text"}, zipfile.ZIP_STORED)
    damaged = bytearray(good)
    pos = damaged.index(b"beta text")
    damaged[pos : pos + 4] = b"XXXX"  # CRC of b.txt no longer matches
    docs, refusals = load_bytes("crc.zip", bytes(damaged), settings)
    assert [d.text for d in docs] == ["alpha text"]
    assert [r.filename for r in refusals] == ["crc.zip/b.txt"]
    assert refusals[0].reason.startswith("corrupt zip member")


def test_zip_bomb_declared_size(settings):
    bomb = make_zip({f"part{i}.txt": b"0" * 200_000 for i in range(5)})
    assert len(bomb) < 10_000  # compresses ~1000:1
    s = settings.model_copy(update={"max_zip_total_bytes": 500_000})
    r = refused(*load_bytes("bomb.zip", bomb, s))
    assert r.reason == ("archive too large when unpacked: 976.6 KB > 488.3 KB limit"
                        " (ingest.max_zip_total_bytes; raise STRATA_MAX_ZIP_MB)")
    assert len(load_bytes("bomb.zip", bomb, settings)[0]) == 5


def test_zip_budget_is_shared_with_nested_archives(settings):
    inner_a = make_zip({"a.txt": b"a " * 15_000})
    inner_b = make_zip({"b.txt": b"b " * 15_000})
    s = settings.model_copy(update={"max_zip_total_bytes": 40_000})
    docs, refusals = load_bytes("outer.zip", make_zip({"1.zip": inner_a, "2.zip": inner_b}), s)
    assert [d.filename for d in docs] == ["outer.zip/1.zip/a.txt"]
    assert [r.filename for r in refusals] == ["outer.zip/2.zip/b.txt"]
    assert "size limit" in refusals[0].reason


def test_zip_member_count_limit(settings):
    data = make_zip({f"f{i}.txt": b"text" for i in range(12)})
    s = settings.model_copy(update={"max_zip_members": 10})
    assert refused(*load_bytes("many.zip", data, s)).reason == ("too many members: 12 > 10 limit"
                                                                       " (ingest.max_zip_members; raise STRATA_MAX_ZIP_MEMBERS)")


def test_zip_member_over_file_limit(settings):
    data = make_zip({"big.txt": b"z" * 5000, "small.txt": b"small"})
    s = settings.model_copy(update={"max_file_bytes": 4000})
    docs, refusals = load_bytes("a.zip", data, s)
    assert [d.filename for d in docs] == ["a.zip/small.txt"]
    assert refusals == [Refusal("a.zip/big.txt", "too large: 4.9 KB > 3.9 KB limit"
                                                 " (ingest.max_file_bytes; raise STRATA_MAX_FILE_MB)")]


def test_zip_hostile_member_names(settings):
    data = make_zip({"../../../etc/evil.txt": b"evil but harmless text"})
    doc = one(*load_bytes("x.zip", data, settings))
    assert doc.filename == "x.zip/evil.txt"


def test_zip_with_only_skipped_members(settings):
    data = make_zip({"__MACOSX/._a.txt": b"fork", ".DS_Store": b"junk", "folder/": b""})
    assert refused(*load_bytes("mac.zip", data, settings)).reason.startswith("empty archive")


# ------------------------------------------------------------------------------------------------------ load_path
def test_load_path_directory(settings, tmp_path):
    (tmp_path / "b.txt").write_text("bee text")
    (tmp_path / "a.md").write_text("# A\n\nay text")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.html").write_text("<p>see text</p>")
    (tmp_path / "sub" / "empty.txt").write_text("")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n")
    (tmp_path / ".hidden.txt").write_text("hidden")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.txt").write_text("hidden too")
    docs, refusals = load_path(tmp_path, settings)
    assert [(d.filename, d.meta["path"]) for d in docs] == [("a.md", "a.md"), ("b.txt", "b.txt"), ("c.html", "sub/c.html")]
    assert refusals == [Refusal("empty.txt", "empty file")]


def test_load_path_missing_and_unreadable(settings, tmp_path, monkeypatch):
    assert refused(*load_path(tmp_path / "nope.txt", settings)).reason == "file not found"
    path = tmp_path / "locked.txt"
    path.write_text("secret")

    def deny(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    assert refused(*load_path(path, settings)) == Refusal("locked.txt", "cannot read file: Permission denied")
