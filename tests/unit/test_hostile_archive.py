"""Issue 35, point 2: one upload must not fill the app's memory with refusals. A 1.5 MB zip of 100 zips of 2,000
unsupported members each (200,000 refusals) once grew the app's process by over 120 MB; now refusals are counted and
grouped per reason with a few names (core/ingest/refusals.py), and one uploaded file's archives are read up to
`ingest.max_archive_members` members in all (STRATA_MAX_ARCHIVE_MEMBERS), the rest refused in one line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from core.config import IngestSettings, Settings
from core.ingest import Refusal, Refusals, load_bytes
from core.ingest.refusals import MAX_EXAMPLES, MAX_REASONS
from tests.unit.test_ingest import make_zip

ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024
INNER, MEMBERS = 100, 2000
CAP_LINE = ("too many archive members (zips inside included), the rest not read: over {n} > {n} limit "
            "(ingest.max_archive_members; raise STRATA_MAX_ARCHIVE_MEMBERS)")


def hostile_zip(inner: int = INNER, members: int = MEMBERS) -> bytes:
    """`inner` zips of `members` tiny unsupported members (x0000.bin, 4 bytes each), deflated, in one zip."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as outer:
        for i in range(inner):
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                for j in range(members):
                    zf.writestr(f"x{j:04d}.bin", b"\0\1\2\3")
            outer.writestr(f"inner{i:03d}.zip", buf.getvalue())
    return out.getvalue()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.zip"
    path.write_bytes(hostile_zip())
    assert path.stat().st_size < 2 * MB
    return path


# Run in a fresh interpreter: the upload as the page sends it (core.workspace.ingest_uploads, settings from the
# environment), the process's resident memory before (after a first upload warmed every import up), after, and at
# its peak during that upload (VmHWM, reset just before), and the report's refusals as JSON.
_PROBE = r"""
import json, sys, time
from pathlib import Path
import psutil
from core.config import Settings
from core.store import Store
from core.workspace import ingest_uploads
settings = Settings.from_env()
store = Store(settings.storage.db_url)
ws = store.create_workspace("hostile")
assert ingest_uploads(store, ws, [("warm.txt", b"A first upload: imports and the parsing process warmed up.")],
                      settings).added
data = Path(sys.argv[1]).read_bytes()
def high_water() -> int:  # VmHWM: the peak resident set since the last reset (Linux)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
before = psutil.Process().memory_info().rss
with open("/proc/self/clear_refs", "w") as f:  # the peak from here on, not the imports' or the warm-up's
    f.write("5")
t0 = time.perf_counter()
report = ingest_uploads(store, ws, [("hostile.zip", data)], settings)
seconds = time.perf_counter() - t0
after = psutil.Process().memory_info().rss
peak = high_water()
print(json.dumps({"grown": after - before, "peak_grown": peak - before, "seconds": seconds,
                  "summary": report.summary(), "refusals": report.refusals.to_json(), "kept": len(report.refusals)}))
"""


def _ingest_in_a_fresh_process(path: Path, home: Path, **env: str) -> dict:
    environ = dict(os.environ, STRATA_HOME=str(home), STRATA_SAMPLE="0", STRATA_DATABASE_URL="",
                   PYTHONPATH=str(ROOT), **env)
    done = subprocess.run([sys.executable, "-c", _PROBE, str(path)], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\n{env}: grown {out['grown'] / MB:.1f} MB, peak {out['peak_grown'] / MB:.1f} MB over the start, "
          f"{out['seconds']:.2f} s, {out['summary']}")
    return out


def _assert_bounded(out: dict) -> Refusals:
    assert out["grown"] < 50 * MB and out["peak_grown"] < 50 * MB, out
    refusals = Refusals.from_json(out["refusals"])
    assert len(refusals.groups) <= 3, refusals
    assert all(len(g.examples) <= MAX_EXAMPLES for g in refusals.groups)
    assert out["kept"] == len(refusals) <= 3 * MAX_EXAMPLES
    assert len(json.dumps(out["refusals"])) < 4000, "the report is a few lines, not one per member"
    return refusals


def test_the_members_past_the_cap_are_refused_in_one_line_and_memory_stays_flat(hostile, tmp_path):
    """Default settings: 10,000 members read (5 inner zips, 9,995 of their members), then one line for the rest."""
    out = _ingest_in_a_fresh_process(hostile, tmp_path / "home")
    refusals = _assert_bounded(out)
    cap = [g for g in refusals.groups if g.reason == CAP_LINE.format(n="10,000")]
    assert len(cap) == 1 and cap[0].count == 1 and cap[0].examples == [Refusal("hostile.zip", cap[0].reason)]
    unsupported = [g for g in refusals.groups if g.reason is not None and g.reason.startswith("unsupported type '.bin'")]
    assert len(unsupported) == 1 and unsupported[0].count == 4 * MEMBERS + 1995, unsupported
    assert [r.filename for r in unsupported[0].examples] == [
        "hostile.zip/inner000.zip/x0000.bin", "hostile.zip/inner000.zip/x0001.bin", "hostile.zip/inner000.zip/x0002.bin"]
    assert refusals.total == 4 * MEMBERS + 1995 + 1
    assert out["summary"] == "0 document(s) added, 9,996 refused"


def test_every_member_counted_when_the_cap_allows_them_all(hostile, tmp_path):
    """The cap raised through its variable: all 200,000 refusals counted exactly, still one group of three names."""
    out = _ingest_in_a_fresh_process(hostile, tmp_path / "home", STRATA_MAX_ARCHIVE_MEMBERS="300000")
    refusals = _assert_bounded(out)
    [group] = refusals.groups
    assert group.count == refusals.total == INNER * MEMBERS
    assert len(group.examples) == MAX_EXAMPLES
    assert out["summary"] == "0 document(s) added, 200,000 refused"


def test_parsed_in_the_apps_own_process_the_loader_is_bounded_too(hostile, tmp_path):
    """STRATA_PARSE_ISOLATE=0: no child process to take the members' weight; the loader itself keeps little."""
    out = _ingest_in_a_fresh_process(hostile, tmp_path / "home", STRATA_MAX_ARCHIVE_MEMBERS="300000",
                                     STRATA_PARSE_ISOLATE="0")
    assert _assert_bounded(out).total == INNER * MEMBERS


# ------------------------------------------------------------------------------------------- the cap, exactly
def test_the_cap_counts_members_across_nesting_levels():
    inner = {f"{k}.zip": make_zip({f"{k}{i}.txt": f"text {k}{i}".encode() for i in range(4)}) for k in "abc"}
    data = make_zip(inner)  # 3 + 12 members in all
    docs, refusals = load_bytes("outer.zip", data, IngestSettings(max_archive_members=6))
    # a.zip (1) and its 4 members (5), b.zip (6): b's first member is past the cap
    assert [d.filename for d in docs] == [f"outer.zip/a.zip/a{i}.txt" for i in range(4)]
    assert refusals == [Refusal("outer.zip", CAP_LINE.format(n=6))]
    docs, refusals = load_bytes("outer.zip", data, IngestSettings(max_archive_members=15))
    assert len(docs) == 12 and refusals == [], "exactly at the cap: everything read, nothing refused"
    flat = make_zip({f"f{i}.txt": b"text %d" % i for i in range(5)})
    docs, refusals = load_bytes("flat.zip", flat, IngestSettings(max_archive_members=3))
    assert len(docs) == 3 and refusals == [Refusal("flat.zip", CAP_LINE.format(n=3))]


def test_the_cap_is_a_setting_with_its_environment_variable():
    assert Settings.from_env({"STRATA_MAX_ARCHIVE_MEMBERS": "123"}).ingest.max_archive_members == 123
    assert Settings.from_env({}).ingest.max_archive_members == IngestSettings().max_archive_members == 10_000


# -------------------------------------------------------------------------------------------- Refusals itself
def test_refusals_stay_bounded_whatever_their_reasons():
    r = Refusals()
    for i in range(50_000):  # every reason different (an exception message naming the member, say)
        r.add(f"m{i}.pdf", f"corrupt zip member: Bad CRC-32 for file 'm{i}.pdf'")
    for i in range(10):
        r.add(f"e{i}.txt", "empty file")
    assert r.total == 50_010
    groups = r.groups
    assert len(groups) == MAX_REASONS + 1 and all(len(g.examples) <= MAX_EXAMPLES for g in groups)
    other = groups[-1]
    assert other.reason is None and other.count == 50_010 - MAX_REASONS
    assert other.examples[0] == Refusal(f"m{MAX_REASONS}.pdf", f"corrupt zip member: Bad CRC-32 for file "
                                                                f"'m{MAX_REASONS}.pdf'"), "each keeps its reason"
    assert len(r.lines()) == MAX_REASONS + 1


def test_refusals_merge_per_upload_and_survive_json():
    a, b = Refusals(), Refusals()
    for i in range(1000):
        a.add(f"a/x{i}.bin", "unsupported type '.bin'")
        b.add(f"b/x{i}.bin", "unsupported type '.bin'")
    b.add("b.txt", "empty file")
    upload = Refusals()
    upload.merge(a)
    upload.merge(b)
    assert upload.total == 2001
    assert [(g.reason, g.count, [e.filename for e in g.examples]) for g in upload.groups] == [
        ("unsupported type '.bin'", 2000, ["a/x0.bin", "a/x1.bin", "a/x2.bin"]), ("empty file", 1, ["b.txt"])]
    assert Refusals.from_json(json.loads(json.dumps(upload.to_json()))) == upload
    assert upload.lines() == ["2,000 files: unsupported type '.bin' (e.g. a/x0.bin, a/x1.bin, a/x2.bin …)",
                              "b.txt: empty file"]


def test_a_reply_cannot_make_refusals_unbounded():
    """The parsing process's JSON goes through the same caps; a reply whose counts do not add up is refused."""
    reply = {"total": 10_000, "groups": [{"reason": "x", "count": 10_000,
                                          "examples": [[f"n{i}", "x"] for i in range(10_000)]}]}
    r = Refusals.from_json(reply)
    assert r.total == 10_000 and len(r) == MAX_EXAMPLES
    with pytest.raises(ValueError):
        Refusals.from_json({"total": 5, "groups": [{"reason": "x", "count": 1, "examples": []}]})
