"""Who may do what to a workspace: its members and their roles, the one check every page, export and job goes
through, and the audit log of refused (and sensitive) actions.

A workspace has members, each with a role: viewer (browse and ask), editor (also upload, build, merge review,
what-if, delete documents), owner (also share and delete the workspace). With `auth.mode` "none" (one laptop) the
one local user may do everything and nothing is checked.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class User:
    """Someone acting on Strata: a signed-in person, the CLI's and workers' service identity, or the local user of a
    laptop without sign-in (`unrestricted`: every workspace, every action, nothing checked)."""

    name: str
    unrestricted: bool = False


LOCAL = User("local", unrestricted=True)
