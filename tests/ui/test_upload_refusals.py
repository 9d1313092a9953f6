"""Issue 35, point 2, on the Workspaces page (AppTest): an upload whose zip of zips is refused member by member shows
one warning per reason (its count and a few names), not one per member; names from the upload are escaped."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.config import Settings
from core.ingest import safe_filename
from core.store import Store
from core.workspace import ingest_uploads
from tests.stores import configure
from tests.ui.conftest import app_home, run
from tests.unit.test_hostile_archive import hostile_zip
from ui.text import md_escape

APP = Path(__file__).resolve().parents[2] / "app.py"
EVIL = "*evil*_[x](javascript:alert(1))<b>$x$.exe"


def test_a_zip_of_zips_refused_member_by_member_is_a_few_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    home = tmp_path / "home"
    settings = Settings()
    settings.storage.home = home
    configure(settings)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    files = [("zips.zip", hostile_zip(inner=10)),  # 20,010 members: 10,000 read, the rest refused in one line
             (EVIL, b"MZ\x90\x00"), ("blank.txt", b"  \n"), ("kept.txt", b"A document that goes in.")]
    report = ingest_uploads(store, ws, files, settings)
    assert report.added == ["kept"]
    with app_home(home):
        at = AppTest.from_file(str(APP), default_timeout=180)
        at.session_state["last_ingest"] = ("w", report)  # as the page keeps it after "Add and build"
        run(at)
    assert "1 document(s) added, 9,998 refused" in [s.value for s in at.success]
    lines = [w.value for w in at.warning if w.icon == ":material/block:"]  # the upload's refusals
    assert len(lines) == 4 and len(at.warning) <= 6, [w.value for w in at.warning]
    assert lines[0].startswith("9,995 files refused: unsupported type '\\.bin'"), lines[0]
    assert lines[0].endswith(", e.g. **zips\\.zip/inner000\\.zip/x0000\\.bin**, **zips\\.zip/inner000\\.zip/x0001"
                             "\\.bin**, **zips\\.zip/inner000\\.zip/x0002\\.bin**, …"), lines[0]
    assert lines[1] == ("**zips\\.zip** refused: too many archive members \\(zips inside included\\), the rest not "
                        "read: over 10,000 > 10,000 limit \\(ingest\\.max\\_archive\\_members; raise "
                        "STRATA\\_MAX\\_ARCHIVE\\_MEMBERS\\)").replace(">", "\\>")
    assert lines[2].startswith(f"**{md_escape(safe_filename(EVIL))}** refused: unsupported type"), "the name's markup escaped"
    assert lines[3] == "**blank\\.txt** refused: empty file"


@pytest.mark.parametrize("n", [1, 3, 4, 5000])
def test_lines_per_reason_whatever_the_count(n):
    from core.ingest import Refusals
    from ui.refusals import refusal_lines

    r = Refusals()
    for i in range(n):
        r.add(f"f_{i}.bin", "unsupported type '.bin'")
    [line] = refusal_lines(r)
    if n == 1:
        assert line == "**f\\_0\\.bin** refused: unsupported type '\\.bin'"
    else:
        assert line.startswith(f"{n:,} files refused: unsupported type '\\.bin', e.g. **f\\_0\\.bin**")
        assert line.count("**") == 2 * min(n, 3) and line.endswith(", …") == (n > 3)
