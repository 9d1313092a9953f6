"""What an upload or a folder refused, counted and grouped by reason: a bounded amount of data whatever it holds.

A zip of zips may hold hundreds of thousands of members the loaders refuse; one `Refusal` each would fill the
app's memory (the one process every user shares) and the page with warnings. `Refusals` keeps, per reason, the
count and the first few file names, at most `MAX_REASONS` reasons (refusals for any further reason are counted in
one "other reasons" group that keeps a few of them, each with its own reason), and the total count.

As a sequence it holds the refusals it kept (each example name with its reason, reasons in the order first seen):
every refusal while there are few, a few of each reason when there are many; `total` counts them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

MAX_REASONS = 8  # reasons kept apart; the refusals of any further reason share one "other reasons" group
MAX_EXAMPLES = 3  # file names kept per reason


@dataclass
class Refusal:
    filename: str
    reason: str


@dataclass
class RefusalGroup:
    """The refusals of one reason (`reason` None: the "other reasons" group, each example with its own reason)."""

    reason: str | None
    count: int = 0
    examples: list[Refusal] = field(default_factory=list)  # the first MAX_EXAMPLES, in the order refused


class Refusals(Sequence[Refusal]):
    """Refusals counted per reason with a few file names each, and their total (see the module's docstring)."""

    def __init__(self, refusals: Iterable[Refusal] = ()) -> None:
        self._groups: dict[str, RefusalGroup] = {}
        self._other = RefusalGroup(None)
        self.total = 0
        for r in refusals:
            self.add(r.filename, r.reason)

    @classmethod
    def one(cls, filename: str, reason: str) -> Refusals:
        out = cls()
        out.add(filename, reason)
        return out

    def add(self, filename: str, reason: str, count: int = 1) -> None:
        """Count `count` refusals for `reason`, `filename` among their examples while there is room."""
        self._add(reason, count, [Refusal(filename, reason)])

    def _add(self, reason: str, count: int, examples: list[Refusal]) -> None:
        if count <= 0:
            return
        self.total += count
        group = self._groups.get(reason)
        if group is None:
            if len(self._groups) < MAX_REASONS:
                group = self._groups[reason] = RefusalGroup(reason)
            else:
                group = self._other
        group.count += count
        room = min(MAX_EXAMPLES - len(group.examples), count)
        if room > 0:
            group.examples += examples[:room]

    def merge(self, other: Refusals) -> None:
        """Add every refusal `other` counted (its examples as far as there is room)."""
        for g in other.groups:
            self._add_group(g.reason, g.count, g.examples)

    def _add_group(self, reason: str | None, count: int, examples: list[Refusal]) -> None:
        if reason is not None:
            self._add(reason, count, examples)
            return
        examples = examples[:max(count, 0)]
        for r in examples:  # refusals of other reasons: each example counted under its own reason
            self._add(r.reason, 1, [r])
        if count > len(examples):  # and those whose reasons were not kept, in the "other reasons" group
            self.total += count - len(examples)
            self._other.count += count - len(examples)

    @property
    def groups(self) -> list[RefusalGroup]:
        """One group per reason, in the order first seen, then the "other reasons" group if any."""
        return list(self._groups.values()) + ([self._other] if self._other.count else [])

    def _kept(self) -> list[Refusal]:
        return [r for g in self.groups for r in g.examples]

    def __iter__(self) -> Iterator[Refusal]:
        return iter(self._kept())

    def __len__(self) -> int:
        """The refusals kept (as many as `total` unless the examples were capped)."""
        return sum(len(g.examples) for g in self.groups)

    @overload
    def __getitem__(self, i: int) -> Refusal: ...

    @overload
    def __getitem__(self, i: slice) -> list[Refusal]: ...

    def __getitem__(self, i: int | slice) -> Refusal | list[Refusal]:
        return self._kept()[i]

    def __eq__(self, other: object) -> bool:
        """Equal to Refusals with the same groups and total, or to a list (tuple) of exactly the same refusals."""
        if isinstance(other, Refusals):
            return self.total == other.total and self.groups == other.groups
        if isinstance(other, (list, tuple)):
            return self.total == len(other) and self._kept() == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"Refusals(total={self.total}, groups={self.groups!r})"

    def lines(self) -> list[str]:
        """Plain text, one line per group: "name: reason" for a lone refusal, else the count and a few names."""
        out = []
        for g in self.groups:
            if g.reason is None:
                shown = "; ".join(f"{r.filename}: {r.reason}" for r in g.examples)
                out.append(f"{g.count:,} refused for other reasons" + (f", e.g. {shown}" if shown else ""))
            elif g.count == 1 and g.examples:
                out.append(f"{g.examples[0].filename}: {g.reason}")
            else:
                names = ", ".join(r.filename for r in g.examples)
                more = " …" if g.count > len(g.examples) else ""
                out.append(f"{g.count:,} files: {g.reason} (e.g. {names}{more})")
        return out

    # ---------------------------------------------------------------- JSON, between the parsing process and the app
    def to_json(self) -> dict:
        return {"total": self.total, "groups": [{"reason": g.reason, "count": g.count,
                                                 "examples": [[r.filename, r.reason] for r in g.examples]}
                                                for g in self.groups]}

    @classmethod
    def from_json(cls, obj: dict) -> Refusals:
        """Rebuilt through the same caps (a reply cannot make it unbounded); a malformed one raises TypeError,
        ValueError or KeyError."""
        out = cls()
        for g in obj["groups"]:
            reason = None if g["reason"] is None else str(g["reason"])
            examples = [Refusal(str(name), str(why)) for name, why in g["examples"][:MAX_EXAMPLES]]
            out._add_group(reason, int(g["count"]), examples)
        if out.total != int(obj["total"]):
            raise ValueError("refusal counts do not add up")
        return out
