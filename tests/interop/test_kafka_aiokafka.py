"""aiokafka (asyncio Kafka client, its own protocol code) against Headwater's Kafka listener.

One broker with two Kafka listeners: ``KAFKA`` (PLAINTEXT) and ``KSEC`` (SASL_SSL with
SCRAM-SHA-512; ``alice``'s credential is in ZooKeeper before the broker starts).

* aiokafka's admin client creates a topic (a second create is TopicAlreadyExistsError),
  lists it and deletes it;
* a producer writes keyed records; a consumer in a group reads them all and commits; a
  second member joins and the group splits the partitions between them; each reads the
  new records of its partition from the committed offsets (nothing twice); when the
  second leaves, the first is given both partitions back;
* over SASL_SSL with SCRAM-SHA-512, alice creates a topic, produces and consumes; a wrong
  password is refused SASL_AUTHENTICATION_FAILED (aiokafka logs it and fails to start).
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer, free_port

pytestmark = pytest.mark.e2e

aiokafka = pytest.importorskip("aiokafka")
aiokafka_admin = pytest.importorskip("aiokafka.admin")
aiokafka_errors = pytest.importorskip("aiokafka.errors")

ALICE_PW = "alice-aiokafka-1"


@dataclass
class Door:
    cluster: Cluster
    plain: str
    secure: str
    truststore: Path


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    tmp = tmp_path_factory.mktemp("aiokafka")
    ca = CertificateAuthority.create()
    truststore = tmp / "ca.pem"
    truststore.write_bytes(ca.pem)
    keystore = write_keystore(tmp / "broker.pem", ca.issue("broker"))
    plain, secure = free_port(), free_port()
    with ZooKeeperServer(tmp / "zookeeper") as zookeeper:
        cluster = Cluster(
            data_dir=tmp / "cluster",
            zookeeper=zookeeper.connect_string,
            overrides={
                "listener.security.protocol.map": (
                    "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,KSEC:SASL_SSL"
                ),
                "kafka.listeners": f"KAFKA://127.0.0.1:{plain},KSEC://127.0.0.1:{secure}",
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.location": str(truststore),
                "listener.name.ksec.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "offsets.topic.replication.factor": "1",
            },
        )
        zk = session.connect(zookeeper.connect_string + cluster.chroot)
        try:
            mechanism = ScramMechanism.SCRAM_SHA_512
            ScramCredentialStore(zk).alter(
                "alice",
                upsertions={
                    mechanism: ScramCredential.from_password(
                        mechanism, ALICE_PW, salt=b"alice", iterations=4096
                    )
                },
            )
        finally:
            session.close(zk)
        with cluster:
            yield Door(cluster, f"127.0.0.1:{plain}", f"127.0.0.1:{secure}", truststore)


def _run(coro: Any, timeout_s: float = 120) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


async def _create_topic(partitions: int = 2, **options: Any) -> str:
    """A new topic, created with aiokafka's admin client of ``options``."""
    name = f"aio-{uuid.uuid4().hex[:10]}"
    admin = aiokafka_admin.AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        await admin.create_topics([aiokafka_admin.NewTopic(name, partitions, 1)], timeout_ms=15000)
    finally:
        await admin.close()
    return name


async def _until(what: str, check: Any, timeout_s: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def test_aiokafka_admin_creates_lists_and_deletes_a_topic(door: Door) -> None:
    async def scenario() -> None:
        name = await _create_topic(partitions=3, bootstrap_servers=door.plain)
        admin = aiokafka_admin.AIOKafkaAdminClient(bootstrap_servers=door.plain)
        await admin.start()
        try:
            assert name in await admin.list_topics()
            again = await admin.create_topics(
                [aiokafka_admin.NewTopic(name, 3, 1)], timeout_ms=15000
            )
            ((_, code, *_),) = again.topic_errors
            assert code == aiokafka_errors.TopicAlreadyExistsError.errno
            await admin.delete_topics([name], timeout_ms=15000)
            await _until_async(lambda: _absent(admin, name))
        finally:
            await admin.close()

    _run(scenario())


async def _absent(admin: Any, name: str) -> bool:
    return name not in await admin.list_topics()


async def _until_async(check: Any, timeout_s: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.2)


def test_aiokafka_group_commits_rebalances_and_resumes(door: Door) -> None:
    async def scenario() -> None:
        topic = await _create_topic(bootstrap_servers=door.plain)
        group = f"g-{uuid.uuid4().hex[:8]}"
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=door.plain, acks="all")
        await producer.start()

        async def produce(first: int, n: int) -> None:
            for i in range(first, first + n):
                await producer.send_and_wait(
                    topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 2
                )

        def member() -> Any:
            return aiokafka.AIOKafkaConsumer(
                topic,
                bootstrap_servers=door.plain,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=300,
                session_timeout_ms=10_000,
            )

        read: dict[str, list[tuple[int, int, bytes]]] = {"a": [], "b": []}

        async def poll(name: str, consumer: Any, stop: asyncio.Event) -> None:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                for tp, records in batches.items():
                    read[name] += [(tp.partition, r.offset, r.value) for r in records]
                if batches:
                    await consumer.commit()

        try:
            await produce(0, 20)
            a = member()
            await a.start()
            stop_a = asyncio.Event()
            polling_a = asyncio.create_task(poll("a", a, stop_a))
            await _until("a to read everything", lambda: len(read["a"]) == 20)
            assert sorted(p for p, *_ in read["a"]) == [0] * 10 + [1] * 10

            b = member()
            await b.start()
            stop_b = asyncio.Event()
            polling_b = asyncio.create_task(poll("b", b, stop_b))
            await _until(
                "the group to split the partitions",
                lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1,
            )
            await produce(20, 10)
            await _until("the new records", lambda: len(read["a"]) + len(read["b"]) == 30)
            (b_tp,) = b.assignment()
            # B starts at A's commit: it reads only the new records of its partition.
            assert sorted(o for p, o, _ in read["b"]) == list(range(10, 15))
            assert {p for p, *_ in read["b"]} == {b_tp.partition}
            stop_b.set()
            await polling_b
            await b.stop()  # leaves the group
            await _until("a to get both back", lambda: len(a.assignment()) == 2)
            stop_a.set()
            await polling_a
            offsets = {tp.partition: await a.committed(tp) for tp in a.assignment()}
            assert offsets == {0: 15, 1: 15}
            await a.stop()
        finally:
            await producer.stop()

    _run(scenario(), timeout_s=180)


def _scram(door: Door, password: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": door.secure,
        "security_protocol": "SASL_SSL",
        "ssl_context": ssl.create_default_context(cafile=str(door.truststore)),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": password,
    }


def test_aiokafka_produces_and_consumes_with_scram_over_tls(
    door: Door, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        topic = await _create_topic(**_scram(door, ALICE_PW))
        producer = aiokafka.AIOKafkaProducer(acks="all", **_scram(door, ALICE_PW))
        await producer.start()
        try:
            for i in range(4):
                await producer.send_and_wait(topic, f"s{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            topic, auto_offset_reset="earliest", **_scram(door, ALICE_PW)
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            while len(got) < 4:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
            assert got == [f"s{i}".encode() for i in range(4)]
        finally:
            await consumer.stop()
        wrong = aiokafka.AIOKafkaProducer(**_scram(door, "not-her-password"))
        with pytest.raises(aiokafka_errors.KafkaConnectionError):
            await wrong.start()  # aiokafka logs why, and raises "Unable to bootstrap"
        await wrong.stop()
        assert "SaslAuthenticationFailed" in caplog.text

    _run(scenario())
