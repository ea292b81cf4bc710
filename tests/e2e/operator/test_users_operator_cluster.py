"""The real kopf operator's User handlers against kmock, with a REAL cluster as the brokers.

Kubernetes is kmock (Secrets in memory); the brokers are three real broker processes
with Kafka's authorizer on and the operator's principal (User:ANONYMOUS on this PLAINTEXT
cluster) a super user.  A User's ACLs and SCRAM credential must appear on the brokers
(read back with the Admin API), follow an update of the spec, and be gone once the User
is deleted; the password in the Secret is one the brokers accept (a SCRAM exchange over
a SASL_PLAINTEXT listener succeeds with it and fails with another).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater import errors
from headwater.client import Admin
from headwater.security import acls
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater_operator.config import OperatorConfig
from headwater_operator.security_config import ClientSecurity
from headwater_operator.users_kube import AdminUsers

from tests.unit.operator import test_kopf_users as kopf_users
from tests.unit.operator.test_kopf_operator import NamingEmulator, running_operator, wait_until
from tests.unit.operator.test_kopf_users import GROUP_ACL, NS, READ_ACL, UserApi, user_body
from tests.unit.operator.test_kopf_users import acls as simple
from tests.unit.operator.user_fakes import FakeSecrets

pytestmark = [pytest.mark.e2e, pytest.mark.kmock(cls=NamingEmulator)]
api = kopf_users.api  # the kmock with the User resource, and its CRD (fixtures)
user_crd = kopf_users.user_crd


@pytest.fixture(scope="module")
def secure_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with Cluster(
        brokers=3,
        data_dir=tmp_path_factory.mktemp("users-cluster"),
        zookeeper=zookeeper.connect_string,
        listeners={"INTERNAL": "PLAINTEXT", "CLIENT": "SASL_PLAINTEXT"},
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    ) as c:
        yield c


def authenticates(cluster: Cluster, user: str, password: str) -> bool:
    """Whether the SCRAM exchange succeeds (the user may still lack ACLs for the call)."""
    try:
        with Admin(
            cluster.bootstrap_for("CLIENT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=user,
            sasl_plain_password=password,
            request_timeout_ms=5000,
            default_api_timeout_ms=10000,
        ) as admin:
            admin.describe_cluster()
    except errors.SaslAuthenticationFailedError:
        return False
    except errors.ClusterAuthorizationFailedError:
        return True  # authenticated, and refused by the authorizer: no ACL for it
    return True


@pytest.mark.asyncio
async def test_users_on_a_real_cluster(
    api: UserApi, secure_cluster: Cluster, tmp_path: Path
) -> None:
    admin = Admin(secure_cluster.bootstrap_for("INTERNAL"), request_timeout_ms=10000)
    secrets = FakeSecrets()
    config = OperatorConfig(
        namespace=NS, resync_interval_s=3600, security=ClientSecurity(super_users=())
    )
    users = {
        "user_admin": lambda: AdminUsers(admin),
        "secrets": lambda: secrets,
        "clients_ca": lambda: None,
        "cleanup_retry_s": 0.5,
    }
    on_brokers = AdminUsers(admin)
    try:
        async with running_operator(api, config, users=users):  # type: ignore[arg-type]
            await api.create(
                user_body("orders-app", authentication={"type": "scram-sha-512"},
                          authorization=simple(READ_ACL, GROUP_ACL))
            )  # fmt: skip
            await wait_until(
                lambda: (c := api.condition("orders-app")) is not None and c["status"] == "True",
                "the User Ready",
                timeout_s=60,
            )
            found = admin.describe_acls(
                acls.AclBindingFilter(
                    entry=acls.AccessControlEntryFilter(principal="User:orders-app")
                )
            )
            assert {(str(b.pattern), b.entry.operation.name) for b in found} == {
                ("TOPIC:LITERAL:orders", "READ"),
                ("TOPIC:LITERAL:orders", "DESCRIBE"),
                ("GROUP:PREFIXED:app-", "READ"),
            }
            password = secrets.secrets["orders-app"][1]["password"]
            assert on_brokers.has_scram("orders-app")
            assert authenticates(secure_cluster, "orders-app", password)
            assert not authenticates(secure_cluster, "orders-app", password + "x")

            await api.patch_spec(
                "orders-app",
                {"authentication": {"type": "scram-sha-512"}, "authorization": simple(GROUP_ACL)},
            )
            await wait_until(
                lambda: (c := api.condition("orders-app", 2)) is not None and c["status"] == "True",
                "the update Ready",
                timeout_s=60,
            )
            rules = on_brokers.acls_of("User:orders-app")
            assert {(r.resource_type, r.operation) for r in rules} == {("GROUP", "READ")}

            await api.delete("orders-app")
            await wait_until(
                lambda: api.stored("orders-app") is None, "the User gone", timeout_s=60
            )
        assert on_brokers.acls_of("User:orders-app") == frozenset()
        assert not on_brokers.has_scram("orders-app")
        assert not authenticates(secure_cluster, "orders-app", password)
        assert "orders-app" not in secrets.secrets
    finally:
        admin.close()
