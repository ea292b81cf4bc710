"""Kubernetes status conditions, updated the way ``kubectl wait`` and users expect.

A condition's ``lastTransitionTime`` moves only when its ``status`` changes
(Kubernetes API conventions), so a resync that finds nothing new leaves the
status byte-for-byte the same and produces no watch event.  The time is
passed in as an RFC 3339 string.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

Condition = dict[str, Any]
ActionT = TypeVar("ActionT")
RefusalT = TypeVar("RefusalT")


def rfc3339(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    return rfc3339(datetime.datetime.now(tz=datetime.UTC))


def find(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    for c in conditions or ():
        if c.get("type") == type_:
            return c
    return None


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    *,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: str,
) -> list[Condition]:
    """``conditions`` with ``type_`` set; other conditions kept in order."""
    text = "True" if status else "False"
    old = find(conditions, type_)
    changed = old is None or old.get("status") != text
    new: Condition = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now if changed or old is None else old.get("lastTransitionTime", now),
    }
    out = [dict(c) for c in conditions or () if c.get("type") != type_]
    out.append(new)
    return out


def same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Same status, reason and message (the transition time aside)."""
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in ("status", "reason", "message"))


class Event(NamedTuple):
    """A Kubernetes Event to post on the resource."""

    type: str  # "Normal" or "Warning"
    reason: str
    message: str


class Outcome(NamedTuple, Generic[ActionT, RefusalT]):
    """What a reconciler did with one resource, for the kopf layer to apply."""

    status: dict[str, Any]
    """The status fields to patch (conditions, observedGeneration, ...)."""
    events: list[Event]
    actions: list[ActionT]
    """What was applied to the cluster, in order."""
    refusal: RefusalT | None
    retriable: bool = False
    """The failure may go away by itself (a broker down): retry soon."""
