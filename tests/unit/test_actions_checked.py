"""Every action that changes a workspace is checked in core at the moment it runs, and audited (issue 35, point 5).

Each entry of CHANGES calls one of core's entry points the pages use. A viewer is refused with one line before
anything happens (no run, no row changed) and the refusal is in the audit log; the cheap ones are also run by an
editor, which leaves an allowed row."""

from __future__ import annotations

import pytest
from sqlmodel import select

from core import access
from core.access import Refused, User
from core.config import Settings
from core.evaluation.job import start_evaluation
from core.models import AuditEvent, BuildRun, CommunityVariant
from core.quality.variants import VariantSettings, delete_variant
from core.store import Store
from core.worker import start_delete, start_promote, start_variant
from core.workspace import retry_failed, start_build

OWNER, VIEWER, EDITOR = User("owner@example.org"), User("viewer@example.org"), User("editor@example.org")
CHANGES = {  # action -> a call of a core entry point as `user`
    "build": lambda st, u, ws, s: start_build(st, u, ws, s),
    "build (retry failed units)": lambda st, u, ws, s: retry_failed(st, u, ws, s),
    "whatif (run a variant)": lambda st, u, ws, s: start_variant(st, u, ws, "v2", VariantSettings(), s),
    "whatif (promote)": lambda st, u, ws, s: start_promote(st, u, ws, s, "v1"),
    "whatif (delete a variant)": lambda st, u, ws, s: delete_variant(st, u, ws, "v1"),
    "delete_documents": lambda st, u, ws, s: start_delete(st, u, ws, s, ["x"]),
    "evaluate": lambda st, u, ws, s: start_evaluation(st, u, ws, s, [{"question": "q", "gold_ids": ["x"]}],
                                                      launch=False),
}


@pytest.fixture
def setup(tmp_path):
    settings = Settings()
    settings.storage.home = tmp_path
    store = Store(settings.storage.db_url)
    ws = access.create(store, OWNER, "w")
    access.share(store, OWNER, ws, VIEWER.name, "viewer")
    access.share(store, OWNER, ws, EDITOR.name, "editor")
    with store.session() as s:
        s.add(CommunityVariant(workspace_id=ws.id, name="v1", settings={}, metrics={}, partition={}))
        s.commit()
    return store, ws, settings


def _audit(store, user: User) -> list[tuple[str, bool]]:
    with store.session() as s:
        return [(e.action, e.allowed) for e in s.exec(select(AuditEvent).where(AuditEvent.user == user.name))]


@pytest.mark.parametrize("what", list(CHANGES))
def test_a_viewer_is_refused_at_the_action_and_it_is_logged(setup, what):
    store, ws, settings = setup
    with pytest.raises(Refused) as err:
        CHANGES[what](store, VIEWER, ws, settings)
    assert "\n" not in str(err.value) and "viewer" in str(err.value)
    action = what.split(" ")[0]
    assert (action, False) in _audit(store, VIEWER)
    with store.session() as s:
        assert not s.exec(select(BuildRun)).all(), "nothing started"
        assert s.exec(select(CommunityVariant)).all(), "nothing deleted"


def test_an_editor_deletes_a_variant_and_it_is_logged(setup):
    store, ws, _ = setup
    delete_variant(store, EDITOR, ws, "v1")
    assert ("whatif", True) in _audit(store, EDITOR)
    with store.session() as s:
        assert not s.exec(select(CommunityVariant)).all()
