"""The record of each upload to a workspace (models.UploadRecord): how many documents it added, its duplicates (the
same content already stored, with the stored document each one repeats) and its refusals, so the Workspaces page
still lists them after a reload or on a later visit. Bounded whatever the upload held: the first MAX_DUPLICATES
duplicates are kept by name (all are counted), refusals as `Refusals` keeps them (a few names per reason), and a
workspace keeps its last KEEP records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import col, delete, select

from core.ingest.refusals import Refusals
from core.models import UploadRecord, Workspace

MAX_DUPLICATES = 200  # duplicates kept by name per upload
KEEP = 20  # upload records kept per workspace


@dataclass
class Upload:
    """One upload as the page lists it."""

    id: int
    at: datetime
    user: str
    added: int
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)  # (file, title, stored document id)
    n_duplicates: int = 0
    refusals: Refusals = field(default_factory=Refusals)

    def summary(self) -> str:
        parts = [f"{self.added:,} document(s) added"]
        if self.n_duplicates:
            parts.append(f"{self.n_duplicates:,} already present")
        if self.refusals.total:
            parts.append(f"{self.refusals.total:,} refused")
        return ", ".join(parts)


def record_upload(store, ws_id: int, user: str, added: int, same_as: list[tuple[str, str, str]],
                  refusals: Refusals) -> int:
    """Store what an upload did (see the module doc); older records beyond KEEP go. Returns the record's id."""
    with store.session() as s:
        row = UploadRecord(workspace_id=ws_id, user=user or "", added=int(added),
                           duplicates=[list(d) for d in same_as[:MAX_DUPLICATES]], n_duplicates=len(same_as),
                           refusals=refusals.to_json())
        s.add(row)
        s.commit()
        assert row.id is not None  # assigned by the database on commit
        rid = row.id
        old = list(s.exec(select(UploadRecord.id).where(UploadRecord.workspace_id == ws_id)
                          .order_by(col(UploadRecord.id).desc()).offset(KEEP)))
        if old:
            s.exec(delete(UploadRecord).where(col(UploadRecord.id).in_(old)))
            s.commit()
    return rid


def recent_uploads(store, ws: Workspace, limit: int = 5) -> list[Upload]:
    """The workspace's last uploads, latest first (none from before it was created: a deleted one's reused id)."""
    with store.session() as s:
        rows = list(s.exec(select(UploadRecord).where(UploadRecord.workspace_id == ws.id,
                                                      UploadRecord.created_at >= ws.created_at)
                           .order_by(col(UploadRecord.id).desc()).limit(limit)))
    out = []
    for r in rows:
        assert r.id is not None  # a stored row has its key
        try:
            refused = Refusals.from_json(r.refusals) if r.refusals else Refusals()
        except (TypeError, ValueError, KeyError):
            refused = Refusals()
        dups = [(str(d[0]), str(d[1]), str(d[2])) for d in (r.duplicates or []) if len(d) == 3]
        out.append(Upload(r.id, r.created_at, r.user, r.added, dups, r.n_duplicates, refused))
    return out
