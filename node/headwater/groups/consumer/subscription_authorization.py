"""Who may subscribe to what: the ACL decision of a ``ConsumerGroupHeartbeat``.

Kafka (``KafkaApis.handleConsumerGroupHeartbeat`` and the group coordinator's
``filterTopicDescribeAuthorizedTopics``) asks three things of a KIP-848 heartbeat:

1. READ on the group, else the whole request answers GROUP_AUTHORIZATION_FAILED;
2. DESCRIBE on every topic the request names in ``subscribed_topic_names``, else the
   whole request answers TOPIC_AUTHORIZATION_FAILED -- a member must not learn, through
   its assignment, of a topic it may not see, and naming one is an error it can act on;
3. a regex subscription (``subscribed_topic_regex``) is not refused: the topics it
   matches that the principal may not DESCRIBE are silently left out of the member's
   subscription, as Metadata leaves them out of a listing.

Fetching the assigned partitions needs READ on each topic, checked by Fetch itself.

The decision is taken here, apart from the I/O: the servicer asks the authorizer and
passes its answers; :func:`authorize_subscription` answers with the refusal or with the
topics the member may be given by its regex (``describable_topics``), which the
heartbeat carries to :class:`~headwater.groups.consumer.group.ConsumerGroup`, where
:func:`regex_authorized` keeps those the member's regex matches.  Pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection

from headwater.errors import ErrorCode


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionAuthorization:
    """The answer of :func:`authorize_subscription`.

    Invariant: ``error_code`` is NONE, or ``describable_topics`` is None (a refused
    request carries nothing to the coordinator).
    """

    error_code: ErrorCode
    error_message: str = ""
    describable_topics: frozenset[str] | None = None
    """The topics a regex subscription may match; None: every topic (no authorizer)."""

    @property
    def refused(self) -> bool:
        return self.error_code is not ErrorCode.NONE


def authorize_subscription(
    *,
    group_id: str,
    group_read: bool,
    subscribed_topic_names: Collection[str] | None,
    describe_refused: Collection[str],
    describable_topics: frozenset[str] | None,
) -> SubscriptionAuthorization:
    """Decide a heartbeat from the authorizer's answers (see the module docstring).

    ``group_read``: READ on ``group_id`` is allowed.  ``subscribed_topic_names``: the
    names the request carries (None: unchanged since the last heartbeat, not checked, as
    in Kafka).  ``describe_refused``: those of them the principal may not DESCRIBE.
    ``describable_topics``: the cluster's topics it may DESCRIBE, or None when
    authorization is off.
    """
    if not group_read:
        return SubscriptionAuthorization(
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            f"not authorized to READ GROUP {group_id!r}",
        )
    refused = sorted(set(describe_refused) & set(subscribed_topic_names or ()))
    if refused:
        return SubscriptionAuthorization(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "not authorized to DESCRIBE TOPIC " + ", ".join(repr(t) for t in refused),
        )
    return SubscriptionAuthorization(ErrorCode.NONE, describable_topics=describable_topics)


def regex_authorized(
    regex: str | None, describable: frozenset[str] | None
) -> frozenset[str] | None:
    """The topics a member's ``regex`` may match: those of its heartbeat's
    ``describable_topics`` it matches (whole name), or None (any) without an authorizer
    or a regex.  ``regex`` was validated when the member sent it."""
    if describable is None or not regex:
        return None
    pattern = re.compile(regex)
    return frozenset(t for t in describable if pattern.fullmatch(t))
