"""The command line's access commands: `python -m core workspaces` (with their members), `share` (give or take a
person's role in a workspace), `audit` (who did or was refused what). The CLI acts as the service identity
(`auth.service_user`, STRATA_SERVICE_USER), which may act on every workspace; what it does is logged under that
name."""

from __future__ import annotations

import argparse

from core import access
from core.config import Settings
from core.store import Store


def add_parsers(sub) -> None:
    w = sub.add_parser("workspaces", help="list workspaces (with their members)")
    w.set_defaults(func=cmd_workspaces)
    sh = sub.add_parser("share", help="give a person a role in a workspace (viewer, editor, owner), or take it away")
    sh.add_argument("--workspace", required=True)
    sh.add_argument("--user", required=True, help="their sign-in email or user name; * is everyone signed in")
    sh.add_argument("--role", choices=[*access.ROLES, "none"], required=True, help="none: take their access away")
    sh.set_defaults(func=cmd_share)
    au = sub.add_parser("audit", help="the audit log: who did or was refused what, newest first")
    au.add_argument("--workspace", default=None)
    au.add_argument("--limit", type=int, default=50)
    au.set_defaults(func=cmd_audit)


def cmd_workspaces(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    for ws in store.workspaces():
        assert ws.id is not None  # a row read from or written to the store has its key
        c = store.counts(ws.id)
        who = ", ".join(f"{access.shown(m.user)} ({m.role})" for m in access.members(store, ws)) or "no members"
        print(f"{ws.name}\tbuild {ws.build_version}\t{ws.backend}\t{c.get('document', 0)} documents\t"
              f"{c.get('entity', 0)} entities\t{c.get('community', 0)} communities\t{who}")
    return 0


def cmd_share(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    me = access.service_user(settings)
    ws = store.require_workspace(args.workspace)
    try:
        access.share(store, me, ws, args.user, None if args.role == "none" else args.role)
    except access.Refused as exc:
        raise ValueError(str(exc)) from None
    print(f"{args.workspace}: {access.shown(args.user)} is "
          f"{'no longer a member' if args.role == 'none' else args.role}")
    return 0


def cmd_audit(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    ws = store.require_workspace(args.workspace) if args.workspace else None
    for e in access.audit_log(store, ws, args.limit):
        print(f"{e.at:%Y-%m-%d %H:%M:%S}\t{access.shown(e.user)}\t{'allowed' if e.allowed else 'REFUSED'}\t"
              f"{e.action}\t{access.shown(e.workspace or '-')}\t{access.shown(e.detail)}")
    return 0
