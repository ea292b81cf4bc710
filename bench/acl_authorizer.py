"""What an authorization check costs on the broker's hot path (issue 18).

Prints, per check: the RequestAuthorizer with no authorizer (the default), a cached
decision, and an uncached decision (Kafka's rules over a snapshot with many literal and
prefixed ACLs), for a topic name of typical length.  Figures only; never asserted.

    .venv/bin/python bench/acl_authorizer.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from headwater.security.acls import AclOperation, PatternType, ResourceType, binding
from headwater.security.authorizer import (
    AclAuthorizer,
    AclSnapshot,
    AuthorizerSettings,
    decide,
)
from headwater.security.principal import KafkaPrincipal, RequestIdentity
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.auth.identity import set_identity

N_LITERAL = 5000
N_PREFIXED = 500
TOPIC = "orders-eu-west-1-payments-v2"


class _Context:
    def peer(self) -> str:
        return "ipv4:10.0.0.7:51234"


def _time(label: str, fn: Callable[[], object], n: int = 200_000) -> None:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - start
    print(f"{label:<58} {elapsed / n * 1e9:9.0f} ns/check  ({n / elapsed:,.0f}/s)")


def main() -> None:
    acls = [
        binding(
            resource_type=ResourceType.TOPIC,
            name=f"topic-{i}",
            principal=f"User:u{i % 50}",
            operation=AclOperation.READ,
        )
        for i in range(N_LITERAL)
    ] + [
        binding(
            resource_type=ResourceType.TOPIC,
            name=f"orders-{i}",
            principal=f"User:u{i % 50}",
            operation=AclOperation.WRITE,
            pattern_type=PatternType.PREFIXED,
        )
        for i in range(N_PREFIXED)
    ]
    acls.append(
        binding(
            resource_type=ResourceType.TOPIC,
            name="orders-",
            principal="User:app",
            operation=AclOperation.WRITE,
            pattern_type=PatternType.PREFIXED,
        )
    )
    snapshot = AclSnapshot.of(acls)
    settings = AuthorizerSettings()
    print(f"{len(snapshot)} ACLs ({N_LITERAL} literal, {N_PREFIXED + 1} prefixed), topic {TOPIC!r}")
    context = _Context()
    set_identity(RequestIdentity(KafkaPrincipal.user("app"), "10.0.0.7"))
    off = RequestAuthorizer(None)
    _time(
        "authorization off (RequestAuthorizer without authorizer)",
        lambda: off.topic(context, AclOperation.WRITE, TOPIC),
    )  # type: ignore[arg-type]
    on = RequestAuthorizer(AclAuthorizer(settings, snapshot))
    _time(
        "authorizer on, cached decision (identity read included)",
        lambda: on.topic(context, AclOperation.WRITE, TOPIC),
    )  # type: ignore[arg-type]
    _time(
        "uncached decision (Kafka's rules, literal + prefixes)",
        lambda: decide(
            snapshot,
            settings,
            principal="User:app",
            host="10.0.0.7",
            operation=AclOperation.WRITE,
            resource_type=ResourceType.TOPIC,
            name=TOPIC,
        ),
        n=50_000,
    )


if __name__ == "__main__":
    main()
