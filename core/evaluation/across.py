"""The evaluations the Compare tab may set side by side: the finished evaluations of the current workspace (every
build) and of the other workspaces the user may read (core/access.py: only those; a workspace the user may not read
is never listed, so no value from the browser can name one of its evaluations), each with those it can be compared
with (compare.one_set: the same question set, paired by question text)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core import access
from core.access import User
from core.evaluation import records
from core.evaluation.compare import same_set, texts
from core.models import Evaluation, Workspace
from core.store import Store


@dataclass
class Comparable:
    evaluations: dict[int, Evaluation] = field(default_factory=dict)  # by id: the current workspace's first
    workspaces: dict[int, str] = field(default_factory=dict)  # workspace id -> name
    partners: dict[int, list[int]] = field(default_factory=dict)  # evaluation id -> those it compares with

    def label(self, ev: Evaluation, here: int) -> str:
        """The evaluation named for a picker: its workspace (when not `here`), name, build, questions, time."""
        where = "" if ev.workspace_id == here else f"{self.workspaces.get(ev.workspace_id, '?')} · "
        return where + records.describe(ev)


def readable(store: Store, user: User, ws: Workspace) -> list[Workspace]:
    """`ws` and the other workspaces the user may read."""
    others = [w for w in access.visible(store, user) if w.id != ws.id]
    return [w for w in [ws, *others] if access.can(store, user, w, "browse")]


def comparable(store: Store, user: User, ws: Workspace) -> Comparable:
    """The finished evaluations of the workspaces the user may read that share a question set with another, the
    current workspace's first, newest first within a workspace."""
    out = Comparable()
    done: list[Evaluation] = []
    for w in readable(store, user, ws):
        assert w.id is not None
        out.workspaces[w.id] = w.name
        done += [e for e in records.list_evaluations(store, w.id) if e.status == "done"]
    keys = {e.id: texts(e) for e in done}
    for e in done:
        assert e.id is not None
        mates = [o.id for o in done if o.id != e.id and o.id is not None and same_set(keys[o.id], keys[e.id])]
        if mates:
            out.evaluations[e.id] = e
            out.partners[e.id] = mates
    return out
