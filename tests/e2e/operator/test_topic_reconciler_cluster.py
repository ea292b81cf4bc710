"""The Topic reconciler's cases (tests/unit/operator/test_topic_reconciler.py) on a real cluster.

Same tests, same assertions; the ``topic_admin`` and ``drift`` fixtures are
overridden to use :class:`headwater.Admin` against three real brokers, so
every refusal is shown to leave a real topic untouched and the reasons carry
the real broker's messages.  Each test's topic names get a unique prefix, so
the tests share one cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from headwater import Admin
from headwater.testing import Cluster
from headwater_operator.topic_reconciler import AdminTopics, TopicAdmin
from headwater_operator.topics import Action, ActualTopic

from tests.unit.operator.test_topic_reconciler import *  # noqa: F403  (the cases)
from tests.unit.operator.test_topic_reconciler import Drift

pytestmark = pytest.mark.e2e


class PrefixedTopics:
    """A :class:`TopicAdmin` that keeps one test's topics apart from the next test's."""

    def __init__(self, inner: AdminTopics, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix

    def describe(self, name: str) -> ActualTopic | None:
        found = self.inner.describe(self.prefix + name)
        return found._replace(name=name) if found else None

    def validate(self, action: Action) -> None:
        self.inner.validate(action._replace(name=self.prefix + action.name))

    def apply(self, action: Action) -> None:
        self.inner.apply(action._replace(name=self.prefix + action.name))

    def delete(self, name: str) -> bool:
        return self.inner.delete(self.prefix + name)


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap, request_timeout_ms=10000, default_api_timeout_ms=15000) as a:
        yield a


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:6]}-"


@pytest.fixture
def topic_admin(admin: Admin, prefix: str) -> TopicAdmin:
    return PrefixedTopics(AdminTopics(admin), prefix)


@pytest.fixture
def drift(admin: Admin, prefix: str) -> Drift:
    def change(name: str, configs: dict[str, str]) -> None:
        current = admin.describe_configs([prefix + name])[prefix + name]
        dynamic = [k for k, e in current.items() if e.source == "DYNAMIC_TOPIC_CONFIG"]
        admin.alter_topic_configs(
            prefix + name,
            set_configs=configs,
            delete_configs=[k for k in dynamic if k not in configs],
        )

    return change
