"""Workspaces belong to people (core/access.py): roles, what each allows, who sees what, refusals that never say
whether a workspace exists, the last owner kept, the audit log; the CLI's `share` and `audit` as the service
identity."""

from __future__ import annotations

import pytest

from core import access
from core.access import Refused, User
from core.config import Settings
from core.store import Store
from tests.unit.test_cli import cli

ANN, BOB, CAT = User("ann@example.org"), User("bob@example.org"), User("cat@example.org")


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'strata.db'}")


def test_a_workspace_is_its_creators_alone_until_shared(store):
    ws = access.create(store, ANN, "ann-ws")
    assert access.role_of(store, ANN, ws) == "owner"
    assert [w.name for w in access.visible(store, ANN)] == ["ann-ws"]
    assert access.visible(store, BOB) == []
    for action in access.ACTIONS:
        assert access.can(store, ANN, ws, action)
        assert not access.can(store, BOB, ws, action)


def test_each_role_allows_what_it_says(store):
    ws = access.create(store, ANN, "w")
    access.share(store, ANN, ws, BOB.name, "viewer")
    access.share(store, ANN, ws, CAT.name, "editor")
    viewer = {a for a in access.ACTIONS if access.can(store, BOB, ws, a)}
    editor = {a for a in access.ACTIONS if access.can(store, CAT, ws, a)}
    assert viewer == {"browse", "ask", "export"}
    assert editor == viewer | {"upload", "build", "stop", "merge", "whatif", "delete_documents", "evaluate"}
    with pytest.raises(Refused, match="viewer of “w”: to build it takes an editor role"):
        access.require(store, BOB, ws, "build")
    with pytest.raises(Refused, match="editor of “w”: to delete it takes an owner role"):
        access.require(store, CAT, ws, "delete_workspace")
    with pytest.raises(Refused, match="share"):  # only owners share
        access.share(store, CAT, ws, "dan@example.org", "owner")


def test_a_refusal_never_says_whether_the_workspace_exists_and_is_logged(store):
    access.create(store, ANN, "secret-project")
    with pytest.raises(Refused) as there:
        access.find(store, BOB, "secret-project")
    with pytest.raises(Refused) as absent:
        access.find(store, BOB, "no-such-project")
    assert str(there.value) == "No workspace “secret-project” you have access to."
    assert str(absent.value) == "No workspace “no-such-project” you have access to."
    log = access.audit_log(store)
    refused = [(e.user, e.action, e.workspace, e.allowed) for e in log if not e.allowed]
    assert ("bob@example.org", "browse", "secret-project", False) in refused
    assert ("bob@example.org", "browse", "", False) in refused  # the absent one: no workspace named in the row
    ws = store.require_workspace("secret-project")
    own = access.audit_log(store, ws)  # what the owner is shown: this workspace's rows only
    assert {e.user for e in own} == {"ann@example.org", "bob@example.org"}


def test_everyone_and_taking_access_away(store):
    ws = access.create(store, ANN, "w")
    access.share(store, ANN, ws, access.EVERYONE, "viewer")
    assert access.role_of(store, BOB, ws) == "viewer"
    access.share(store, ANN, ws, BOB.name, "editor")
    assert access.role_of(store, BOB, ws) == "editor"  # the stronger of their own and everyone's
    access.share(store, ANN, ws, access.EVERYONE, None)
    access.share(store, ANN, ws, BOB.name, None)
    assert access.role_of(store, BOB, ws) is None and access.visible(store, BOB) == []


def test_the_last_owner_stays(store):
    ws = access.create(store, ANN, "w")
    with pytest.raises(Refused, match="last owner"):
        access.share(store, ANN, ws, ANN.name, "viewer")
    access.share(store, ANN, ws, BOB.name, "owner")
    access.share(store, ANN, ws, ANN.name, None)  # another owner is there now
    assert [m.user for m in access.members(store, ws)] == [BOB.name]


def test_admins_and_the_service_identity_act_on_everything(store):
    ws = access.create(store, ANN, "w")
    s = Settings()
    s.auth.mode, s.auth.admins = "oidc", ["root@example.org"]
    assert access.can(store, access.signed_in(s, "root@example.org"), ws, "delete_workspace")
    assert not access.can(store, access.signed_in(s, BOB.name), ws, "browse")
    svc = access.service_user(s)
    assert svc.name == "strata-service" and access.can(store, svc, ws, "share")


def test_deleting_a_workspace_drops_its_members_and_keeps_its_log(store):
    ws = access.create(store, ANN, "w")
    store.delete_workspace(ws)
    again = access.create(store, BOB, "w")  # the same name, a new owner: nothing of ann's carries over
    assert [m.user for m in access.members(store, again)] == [BOB.name]
    assert any(e.user == ANN.name and e.action == "create" for e in access.audit_log(store))


def test_cli_acts_as_the_service_identity_and_shares(tmp_path, tiny_corpus):
    env = {"STRATA_AUTH": "oidc", "STRATA_SERVICE_USER": "ops-bot"}
    p = cli(tmp_path, "build", "--workspace", "team", str(tiny_corpus), env=env)
    assert p.returncode == 0, p.stderr
    p = cli(tmp_path, "share", "--workspace", "team", "--user", "bob@example.org", "--role", "viewer", env=env)
    assert p.returncode == 0, p.stderr
    p = cli(tmp_path, "workspaces", env=env)
    assert "ops-bot (owner), bob@example.org (viewer)" in p.stdout, p.stdout
    p = cli(tmp_path, "share", "--workspace", "team", "--user", "ops-bot", "--role", "none", env=env)
    assert p.returncode == 2 and "last owner" in p.stderr
    p = cli(tmp_path, "audit", "--workspace", "team", env=env)
    assert "ops-bot\tallowed\tshare\tteam\tbob@example.org: viewer" in p.stdout, p.stdout


def test_a_name_with_control_characters_is_refused_and_stored_names_print_escaped(store, capsys):
    ws = access.create(store, ANN, "w")
    for bad in ("eve@example.org\n2026-01-01 00:00:00\tadmin\tallowed", "eve\tx", "\x1b[31mred", "a\u202eb"):
        with pytest.raises(Refused, match="control characters"):
            access.share(store, ANN, ws, bad, "viewer")
    assert [m.user for m in access.members(store, ws)] == [ANN.name]
    access.record(store, User("x\n\x1b[2Jforged"), "browse", ws, allowed=False)
    assert access.shown("x\n\x1b[2Jforged") == "x\\n\\x1b[2Jforged"


def test_creating_a_taken_name_reads_the_same_whoever_holds_it(store):
    access.create(store, ANN, "ann-ws")
    access.create(store, BOB, "bob-ws")
    from core.store import StoreError

    lines = []
    for name in ("ann-ws", "bob-ws"):
        with pytest.raises(StoreError) as err:
            access.create(store, ANN, name)
        lines.append(str(err.value).replace(name, "NAME"))
    assert lines[0] == lines[1] and "exist" not in lines[0]
