"""Node, document and community ids that depend on content only, not on the workspace they are stored in.

An id is 20 hex digits of a SHA-256 over the content that names the thing (`content_id` of its parts), then `~` and
the workspace's number: the number keeps ids unique in a database that holds several workspaces, and since it is the
same for every id of a workspace, ids sort, tie and hash-order the same in every workspace built from the same
documents. An id that goes into another id goes in without its workspace part (`local_id`), so every derived id
(a chunk from its document, a relationship from its entities, a community from its members) is the same in every
workspace too. Two workspaces built from one corpus are then equal node for node, edge for edge and community for
community (tests/stages/test_workspace_independent.py).

Workspaces built before this scheme salted the hash with their row number instead (`Workspace.salted_ids`); their
new ids are made the same way, so documents added to them still meet their existing entities.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.models import Workspace
from core.store import content_id

SEP = "~"


def local_id(any_id: str) -> str:
    """`any_id` without its workspace part: what it names, the same in every workspace (a salted id as it is)."""
    return any_id.split(SEP, 1)[0]


@dataclass(frozen=True)
class IdScope:
    """Makes the ids of one workspace."""

    ws_id: int
    salted: bool = False  # a workspace from before content-only ids: its number salts the hash, as it did

    def id(self, *parts: str) -> str:
        """The id of the thing named by `parts` (ids among them without their workspace part, see `local_id`)."""
        if self.salted:
            return content_id(str(self.ws_id), *parts)
        return f"{content_id(*parts)}{SEP}{self.ws_id}"


def scope_of(ws: Workspace) -> IdScope:
    assert ws.id is not None  # a stored workspace
    return IdScope(ws.id, bool(ws.salted_ids))


def scope_by_id(store, ws_id: int) -> IdScope:
    """The id scope of the stored workspace `ws_id`."""
    with store.session() as s:
        ws = s.get(Workspace, ws_id)
    if ws is None:
        raise LookupError(f"no workspace {ws_id}")
    return scope_of(ws)


def owned(s, model, ws_id: int, key):
    """The row of `model` (a table with a `workspace_id`) whose primary key is `key`, when it belongs to workspace
    `ws_id`; else None. Every read of a row by an id that may have come from outside (a page's widget, a link, a
    component's click) goes through here or names the workspace in its query: an id never opens another
    workspace's row, and a missing row and another workspace's read the same."""
    if key is None or not isinstance(key, (str, int)) or isinstance(key, bool):
        return None
    row = s.get(model, key)
    return row if row is not None and row.workspace_id == ws_id else None
