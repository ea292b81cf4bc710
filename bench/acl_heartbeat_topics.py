"""What a ConsumerGroupHeartbeat's topic check costs with ACLs on (issue 18).

Each heartbeat asks which of the cluster's topics its principal may DESCRIBE (a regex
subscription matches no other; headwater.groups.consumer.subscription_authorization).  Prints,
per cluster size, the answer computed afresh (a new principal or an ACL change: one
authorizer decision per topic), after a metadata change (set operations, new topics
decided) and remembered (every other heartbeat; ``RequestAuthorizer.allowed_topics``).
Figures only; never asserted.

    .venv/bin/python bench/acl_heartbeat_topics.py
"""

from __future__ import annotations

import time

from headwater.security.acls import AclOperation, PatternType, ResourceType, binding
from headwater.security.authorizer import AclAuthorizer, AclSnapshot, AuthorizerSettings
from headwater.security.principal import KafkaPrincipal, RequestIdentity
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.auth.identity import set_identity


class _Context:
    def peer(self) -> str:
        return "ipv4:10.0.0.7:51234"


def main() -> None:
    set_identity(RequestIdentity(KafkaPrincipal.user("app"), "10.0.0.7"))
    snapshot = AclSnapshot.of(
        [
            binding(
                resource_type=ResourceType.TOPIC,
                name="orders-",
                principal="User:app",
                operation=AclOperation.DESCRIBE,
                pattern_type=PatternType.PREFIXED,
            )
        ]
    )
    context = _Context()
    for n in (100, 1_000, 10_000):
        topics = {f"orders-{i}" if i % 2 else f"payments-{i}": None for i in range(n)}
        authz = RequestAuthorizer(AclAuthorizer(AuthorizerSettings(), snapshot))
        start = time.perf_counter()
        allowed = authz.allowed_topics(context, AclOperation.DESCRIBE, topics, version=1)  # type: ignore[arg-type]
        cold = time.perf_counter() - start
        k = 2_000
        start = time.perf_counter()
        for _ in range(k):
            authz.allowed_topics(context, AclOperation.DESCRIBE, topics, version=1)  # type: ignore[arg-type]
        warm = (time.perf_counter() - start) / k
        start = time.perf_counter()
        authz.allowed_topics(context, AclOperation.DESCRIBE, topics, version=2)  # type: ignore[arg-type]
        moved = time.perf_counter() - start
        print(
            f"{n:>6} topics ({len(allowed or ())} describable): "
            f"afresh {cold * 1e3:8.2f} ms, after a metadata change {moved * 1e3:6.2f} ms, "
            f"remembered {warm * 1e6:6.1f} us per heartbeat"
        )


if __name__ == "__main__":
    main()
