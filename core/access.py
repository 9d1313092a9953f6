"""Who may do what to a workspace: its members and their roles, the one check every page, export and job goes
through, and the audit log of refused (and sensitive) actions.

A workspace has members, each with a role: viewer (browse and ask), editor (also upload, build, merge review,
what-if, delete documents), owner (also share, delete the workspace and read its audit log). Member "*" is
everyone signed in (the bundled sample is shared so, as viewer). With `auth.mode` "none" (one laptop) the one local
user may do everything and nothing is checked; admins (`auth.admins`) and the CLI's and workers' service identity
(`auth.service_user`) may act on every workspace, and what they do is logged under their name.

A refusal never says whether a workspace the user may not see exists: "no workspace 'x' you have access to".
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from sqlmodel import col, delete, select

from core.config import Settings
from core.models import AuditEvent, Member, Workspace
from core.store import Store, StoreError, check_workspace_name

ROLES = ("viewer", "editor", "owner")
EVERYONE = "*"
# the least role each action needs
ACTIONS = {"browse": "viewer", "ask": "viewer", "export": "viewer",
           "upload": "editor", "build": "editor", "stop": "editor", "merge": "editor", "whatif": "editor",
           "delete_documents": "editor", "evaluate": "editor",
           "share": "owner", "delete_workspace": "owner", "audit": "owner"}
LOGGED = frozenset(a for a, r in ACTIONS.items() if r != "viewer") - {"share", "audit"}  # allowed, logged too
# (what changes data; `share` logs its own row, with whom and what role)
WHAT = {"browse": "open", "ask": "ask questions of", "export": "export", "upload": "add documents to",
        "build": "build", "stop": "stop a run of", "merge": "decide merges in", "whatif": "run what-if variants of",
        "delete_documents": "delete documents of", "share": "share", "delete_workspace": "delete",
        "evaluate": "run evaluations of",
        "audit": "read the audit log of"}


@dataclass(frozen=True)
class User:
    """Someone acting on Strata: a signed-in person, the CLI's and workers' service identity, or the local user of a
    laptop without sign-in (`unrestricted`: every workspace, every action, nothing checked)."""

    name: str
    unrestricted: bool = False


LOCAL = User("local", unrestricted=True)


class Refused(PermissionError):
    """An action the user's role does not allow: the message is the one line to show."""


def service_user(settings: Settings) -> User:
    """Who the CLI and the workers act as: `auth.service_user` (STRATA_SERVICE_USER), or the local user without
    sign-in."""
    return LOCAL if settings.auth.mode == "none" else User(settings.auth.service_user, unrestricted=True)


def signed_in(settings: Settings, name: str) -> User:
    """The person `name` (a sign-in's email or subject, a proxy's header)."""
    return User(name, unrestricted=name in settings.auth.admins)


def role_of(store: Store, user: User, ws: Workspace) -> str | None:
    """The user's role in `ws` (the stronger of their own and everyone's), None when they have none."""
    if user.unrestricted:
        return "owner"
    with store.session() as s:
        roles = list(s.exec(select(Member.role).where(Member.workspace_id == ws.id,
                                                      col(Member.user).in_([user.name, EVERYONE]))))
    return max(roles, key=ROLES.index) if roles else None


def allows(role: str | None, action: str) -> bool:
    return role is not None and ROLES.index(role) >= ROLES.index(ACTIONS[action])


def can(store: Store, user: User, ws: Workspace, action: str) -> bool:
    return allows(role_of(store, user, ws), action)


def require(store: Store, user: User, ws: Workspace, action: str) -> None:
    """Return when the user may `action` the workspace (logged when it changes something: `LOGGED`); else log the
    refusal and raise Refused (one line)."""
    role = role_of(store, user, ws)
    if allows(role, action):
        if action in LOGGED:
            record(store, user, action, ws, allowed=True)
        return
    record(store, user, action, ws, allowed=False, detail=f"role {role or 'none'}")
    if role is None:
        raise Refused(f"No workspace “{ws.name}” you have access to.")
    raise Refused(f"You are a {role} of “{ws.name}”: to {WHAT[action]} it takes an {ACTIONS[action]} role "
                  f"(ask one of its owners).")


def history_of(store: Store, user: User, ws: Workspace) -> str | None:
    """Whose questions of `ws` the user may read in its history: None for everyone's (a member in their own name,
    an admin, the service, the local user), else only their own (their access comes from `*` alone: on a workspace
    shared with everyone signed in, such as the sample, nobody reads a stranger's questions)."""
    if user.unrestricted:
        return None
    with store.session() as s:
        own = s.exec(select(Member.id).where(Member.workspace_id == ws.id, Member.user == user.name)).first()
    return None if own is not None else user.name


def printable(name: str) -> bool:
    """No control characters (Unicode category C: newlines, tabs, escapes, format and private-use characters)."""
    return not any(unicodedata.category(ch).startswith("C") for ch in name)


def shown(text: str) -> str:
    """`text` for a terminal line: control characters as escapes (a stored name never forges a line or a colour)."""
    return "".join(ch if not unicodedata.category(ch).startswith("C") else ascii(ch)[1:-1] for ch in text)


def visible(store: Store, user: User) -> list[Workspace]:
    """The workspaces the user may see, by name."""
    if user.unrestricted:
        return store.workspaces()
    with store.session() as s:
        ids = set(s.exec(select(Member.workspace_id).where(col(Member.user).in_([user.name, EVERYONE]))))
    return [w for w in store.workspaces() if w.id in ids]


def find(store: Store, user: User, name: str, action: str = "browse") -> Workspace:
    """The workspace `name` if the user may `action` it; Refused (logged) otherwise, whether or not it exists."""
    ws = store.get_workspace(name)
    if ws is None:
        record(store, user, action, None, allowed=False, detail=f"no workspace {name!r}")
        raise Refused(f"No workspace “{name}” you have access to.")
    require(store, user, ws, action)
    return ws


def create(store: Store, user: User, name: str) -> Workspace:
    """A new workspace owned by `user` (StoreError for a bad or taken name). A taken name gets the same line
    whoever holds it, so creating never tells whether a workspace one may not see exists."""
    check_workspace_name(name)
    if store.get_workspace(name) is not None:
        raise StoreError(f"the name {name!r} cannot be used for a new workspace: choose another")
    ws = store.create_workspace(name)
    _set(store, ws, user.name, "owner", user.name)
    record(store, user, "create", ws, allowed=True)
    return ws


def adopt(store: Store, ws: Workspace, owner: str, everyone: str | None = None) -> None:
    """Give a workspace with no members an owner (and everyone a role): the sample, one made by the CLI."""
    if not members(store, ws):
        _set(store, ws, owner, "owner", owner)
        if everyone:
            _set(store, ws, EVERYONE, everyone, owner)


def members(store: Store, ws: Workspace) -> list[Member]:
    with store.session() as s:
        return list(s.exec(select(Member).where(Member.workspace_id == ws.id).order_by(col(Member.id))))


def share(store: Store, by: User, ws: Workspace, name: str, role: str | None) -> None:
    """Give `name` the `role` in `ws` (None: take their access away); owners only. The last owner stays."""
    require(store, by, ws, "share")
    name = name.strip()
    if not name:
        raise Refused("Name the person to share with (their sign-in email or user name).")
    if not printable(name):
        raise Refused("A person's name holds no control characters (newlines, tabs, escape sequences).")
    if role is not None and role not in ROLES:
        raise Refused(f"A role is one of {', '.join(ROLES)}, not {role!r}.")
    owners = [m.user for m in members(store, ws) if m.role == "owner"]
    if owners == [name] and role != "owner":
        raise Refused(f"{name} is the last owner of “{ws.name}”: make someone else an owner first.")
    if role is None:
        with store.session() as s:
            s.exec(delete(Member).where(col(Member.workspace_id) == ws.id, col(Member.user) == name))
            s.commit()
    else:
        _set(store, ws, name, role, by.name)
    record(store, by, "share", ws, allowed=True, detail=f"{name}: {role or 'removed'}")


def _set(store: Store, ws: Workspace, name: str, role: str, by: str) -> None:
    with store.session() as s:
        row = s.exec(select(Member).where(Member.workspace_id == ws.id, Member.user == name)).first()
        if row is None:
            assert ws.id is not None  # a stored workspace
            row = Member(workspace_id=ws.id, user=name, role=role, added_by=by)
        row.role, row.added_by = role, by
        s.add(row)
        s.commit()


def record(store: Store, user: User, action: str, ws: Workspace | None, allowed: bool, detail: str = "") -> None:
    """One audit row: who, what, when, which workspace, allowed or refused."""
    with store.session() as s:
        s.add(AuditEvent(user=user.name, action=action, workspace_id=ws.id if ws is not None else None,
                         workspace=ws.name if ws is not None else "", allowed=allowed, detail=detail[:500]))
        s.commit()


def audit_log(store: Store, ws: Workspace | None = None, limit: int = 500) -> list[AuditEvent]:
    """The newest audit rows (of `ws`, else all), newest first."""
    q = select(AuditEvent)
    if ws is not None:
        q = q.where(AuditEvent.workspace_id == ws.id, AuditEvent.workspace == ws.name)
    with store.session() as s:
        return list(s.exec(q.order_by(col(AuditEvent.id).desc()).limit(limit)))
