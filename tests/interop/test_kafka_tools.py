"""Apache Kafka's own command-line tools, unchanged, against Headwater's Kafka listener.

The tools are Kafka 3.9.1's classes from Maven Central (``scripts/fetch-kafka-tools.sh``
puts them in ``.tools/kafka-tools``), each run as its shell script runs it, one JVM per
command, against a two-broker cluster whose brokers each have a Kafka listener.  Every
test checks what the tool printed and what the cluster then holds, read back through
Headwater's own gRPC client:

* kafka-topics (``TopicCommand``): create with a config, list, describe (partitions,
  leaders, replicas, the override, the topic id kept in its znode), add partitions (the
  id stays), delete, create again (a new id); creating a topic twice fails with Kafka's
  message;
* the console producer and consumer: lines with headers and keys in, read back by a
  group with the same keys, headers and values at the offsets Headwater holds, and the
  group's offsets committed at the end of the log;
* kafka-consumer-groups (``ConsumerGroupCommand``): ``--describe`` shows each
  partition's committed offset, log end and lag; ``--reset-offsets`` as a dry run
  changes nothing, with ``--execute`` moves the group to the earliest offsets, to an
  offset and by a shift (clamped to the log end), and the console consumer then reads
  exactly the records from the reset point; ``--list``, ``--describe --state`` and
  ``--delete``; a console consumer with ``group.protocol=consumer`` (KIP-848) is described
  as a member of a ``uniform``-assigned Stable group, with its commits;
* kafka-configs (``ConfigCommand``): alter, describe and delete a topic's configs and a
  broker's and the cluster default's dynamic configs; deleting a config that is not set,
  a bad value and a read-only broker config are refused and change nothing;
* kafka-acls (``AclCommand``): add (``--allow-principal``, ``--consumer``, a prefixed
  deny), list and remove ACLs, which Headwater's AclService then holds;
* the verifiable producer and consumer (the tools of Kafka's own system tests) on a
  three-broker RF=3 cluster with acks=all while the partition's leader is killed: every
  acknowledged record is consumed, at the offset its acknowledgement named (``slow``:
  ``make interop-slow``).

Without Java or the jars the tests skip, saying why, unless ``CI`` is set: then the fetch
script runs, and a failure fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from headwater.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from headwater.security import acls
from headwater.testing import Cluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOOLS_DIR = Path(os.environ.get("KAFKA_TOOLS_DIR", ROOT / ".tools" / "kafka-tools"))
FETCH_SCRIPT = ROOT / "scripts" / "fetch-kafka-tools.sh"
POM = Path(__file__).with_name("kafka-tools-pom.xml")

# Where Kafka 3.9.1 keeps each tool (its bin/*.sh scripts name the same classes).
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS = "kafka.admin.ConfigCommand"
ACLS = "kafka.admin.AclCommand"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"

# Short-lived JVMs: start fast rather than run fast.
JVM_FLAGS = ("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")
LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""
TOOL_TIMEOUT_S = 120


def _tools_ready() -> bool:
    stamp = ".complete-" + hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return (TOOLS_DIR / stamp).exists()


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class KafkaTools:
    """Runs a Kafka tool class as its ``bin/kafka-*.sh`` script does."""

    def __init__(self, classpath: str, log4j: Path) -> None:
        self.classpath = classpath
        self.log4j = log4j

    def command(self, main_class: str, args: str) -> list[str]:
        """The command line; ``args`` are the tool's arguments, split at whitespace."""
        log4j = f"-Dlog4j.configuration=file:{self.log4j}"
        return ["java", *JVM_FLAGS, log4j, "-cp", self.classpath, main_class, *args.split()]

    def run(self, main_class: str, args: str, *, stdin: str | None = None) -> Ran:
        done = subprocess.run(
            self.command(main_class, args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )
        return Ran(done.returncode, done.stdout, done.stderr)

    def ok(self, main_class: str, args: str, *, stdin: str | None = None) -> Ran:
        """Run the tool and fail the test, with its output, unless it exits 0."""
        ran = self.run(main_class, args, stdin=stdin)
        if ran.returncode != 0:
            pytest.fail(
                f"{main_class.rsplit('.', 1)[-1]} {args} exited {ran.returncode}:\n"
                f"--- stdout\n{ran.stdout}\n--- stderr\n{ran.stderr}"
            )
        return ran


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> KafkaTools:
    """Kafka's tools, fetching the jars first under CI."""
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but `java` is not on PATH (run scripts/install-system-deps.sh)")
        pytest.skip("java is not installed, so Kafka's tools cannot run")
    if not _tools_ready():
        if not os.environ.get("CI"):
            pytest.skip(
                f"Kafka's tools are not in {TOOLS_DIR}; run `bash {FETCH_SCRIPT.relative_to(ROOT)}`"
            )
        done = subprocess.run(
            ["bash", str(FETCH_SCRIPT)], capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode != 0 or not _tools_ready():
            pytest.fail(f"{FETCH_SCRIPT.name} failed:\n{done.stdout}\n{done.stderr}")
    log4j = tmp_path_factory.mktemp("kafka-tools") / "log4j.properties"
    log4j.write_text(LOG4J)
    return KafkaTools(str(TOOLS_DIR / "*"), log4j)


def _kafka_cluster(brokers: int, data_dir: Path, **overrides: str) -> Cluster:
    return Cluster(
        brokers=brokers,
        data_dir=data_dir,
        kafka_listener=True,
        overrides={
            # ACLs are stored and served (kafka-acls); every client here is a super user.
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
            # A console consumer's group forms at once, not after Kafka's 3 s first-join delay.
            "group.initial.rebalance.delay.ms": "0",
            **overrides,
        },
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with _kafka_cluster(2, tmp_path_factory.mktemp("kafka-tools-cluster")) as c:
        yield c


def bootstrap(cluster: Cluster) -> str:
    """The brokers' Kafka listeners, ``host:port,...``."""
    return cluster.kafka_bootstrap


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def new_topic(cluster: Cluster, partitions: int = 2, replication_factor: int = 1) -> str:
    name = unique("kt")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, replication_factor)], timeout_ms=15000)
    for p in range(partitions):
        cluster.wait_for(lambda p=p: cluster.leader_for(name, p) is not None, what="a leader")
    return name


def produce(cluster: Cluster, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` records into partition ``p`` through Headwater's gRPC producer."""
    producer = Producer(cluster.bootstrap)
    try:
        futures = [
            producer.send(topic, f"p{p}-v{i}".encode(), key=f"k{i}".encode(), partition=p)
            for p, n in counts.items()
            for i in range(n)
        ]
        for f in futures:
            f.result(timeout=30)
    finally:
        producer.close()


def read_all(cluster: Cluster, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record of ``topic`` through Headwater's gRPC consumer (``expected`` of them)."""
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    got: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(500)
    finally:
        consumer.close()
    assert len(got) == expected
    return got


def committed(cluster: Cluster, group: str) -> dict[int, int]:
    with Admin(cluster.bootstrap) as admin:
        return {
            tp.partition: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()
        }


def table(output: str) -> list[dict[str, str]]:
    """The rows of a kafka-consumer-groups table: its header is the run of upper-case words
    from GROUP TOPIC on, and each row the next header's worth of words.  Kafka 3.9 prints
    the rows of ``--reset-offsets`` without line breaks between them, so lines are not rows."""
    words = output.split()
    start = next((i for i in range(len(words)) if words[i : i + 2] == ["GROUP", "TOPIC"]), None)
    assert start is not None, f"no GROUP table in:\n{output}"
    end = start
    while end < len(words) and re.fullmatch(r"[A-Z-]+", words[end]):
        end += 1
    header, cells = words[start:end], words[end:]
    assert cells and len(cells) % len(header) == 0, f"not a table of {header} in:\n{output}"
    return [
        dict(zip(header, cells[k : k + len(header)], strict=True))
        for k in range(0, len(cells), len(header))
    ]


# -- kafka-topics ----------------------------------------------------------------------------


def test_kafka_topics_creates_lists_describes_grows_and_deletes(
    cluster: Cluster, tools: KafkaTools
) -> None:
    topic = unique("topics")
    b = f"--bootstrap-server {bootstrap(cluster)}"
    created = tools.ok(
        TOPICS,
        f"{b} --create --topic {topic} --partitions 2 --replication-factor 2 "
        "--config retention.ms=86400000",
    )
    assert f"Created topic {topic}." in created.stdout
    with Admin(cluster.bootstrap) as admin:
        [parts] = admin.describe_topics([topic]).values()
        assert len(parts.partitions) == 2 and parts.replication_factor == 2
        config = admin.describe_configs([topic])[topic]["retention.ms"]
        assert (config.value, config.source) == ("86400000", "DYNAMIC_TOPIC_CONFIG")

    again = tools.run(TOPICS, f"{b} --create --topic {topic} --partitions 1")
    assert again.returncode != 0
    assert f"Topic '{topic}' already exists" in again.output

    assert topic in tools.ok(TOPICS, f"{b} --list").stdout.split()

    described = tools.ok(TOPICS, f"{b} --describe --topic {topic}").stdout
    assert re.search(rf"Topic: {topic}\s.*PartitionCount: 2\s+ReplicationFactor: 2", described)
    assert "retention.ms=86400000" in described
    stored = cluster.zk.get_assignment(topic)  # the id drawn at creation, in the znode
    assert stored is not None and f"TopicId: {stored.topic_id}\t" in described
    shown = {
        int(m[1]): (int(m[2]), m[3])
        for m in re.finditer(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)", described)
    }
    assert shown == {
        p.partition: (p.leader, ",".join(map(str, p.replicas))) for p in parts.partitions
    }

    tools.ok(TOPICS, f"{b} --alter --topic {topic} --partitions 4")
    with Admin(cluster.bootstrap) as admin:
        cluster.wait_for(
            lambda: len(admin.describe_topics([topic])[topic].partitions) == 4,
            what="4 partitions",
        )
    grown = tools.ok(TOPICS, f"{b} --describe --topic {topic}").stdout
    assert "PartitionCount: 4" in grown
    assert f"TopicId: {stored.topic_id}\t" in grown  # adding partitions keeps the id

    tools.ok(TOPICS, f"{b} --delete --topic {topic}")
    with Admin(cluster.bootstrap) as admin:
        cluster.wait_for(lambda: topic not in admin.list_topics(), what="the topic deleted")
    assert topic not in tools.ok(TOPICS, f"{b} --list").stdout.split()

    # Created again under its name: a new topic, with a new id (as Kafka 2.8+).
    tools.ok(TOPICS, f"{b} --create --topic {topic} --partitions 1 --replication-factor 2")
    recreated = cluster.zk.get_assignment(topic)
    assert recreated is not None and recreated.topic_id not in ("", stored.topic_id)
    cluster.wait_for(  # each broker learns of the new topic on its own time
        lambda: (
            f"TopicId: {recreated.topic_id}\t"
            in tools.run(TOPICS, f"{b} --describe --topic {topic}").stdout
        ),
        what="kafka-topics describing the new id",
    )
    tools.ok(TOPICS, f"{b} --delete --topic {topic}")


# -- console producer and consumer -------------------------------------------------------


def test_console_producer_and_consumer_carry_keys_and_headers(
    cluster: Cluster, tools: KafkaTools
) -> None:
    topic = new_topic(cluster)
    group = unique("console")
    b = f"--bootstrap-server {bootstrap(cluster)}"
    sent = [
        (f"key-{i}", f"value {i}: {'x' * i}", [("trace", f"t{i}"), ("n", str(i))]) for i in range(8)
    ]
    # Console producer lines: headers, tab, key, tab, value (its default separators).
    lines = "".join(
        ",".join(f"{k}:{v}" for k, v in headers) + f"\t{key}\t{value}\n"
        for key, value, headers in sent
    )
    tools.ok(
        CONSOLE_PRODUCER,
        f"{b} --topic {topic} --property parse.key=true --property parse.headers=true",
        stdin=lines,
    )

    held = read_all(cluster, topic, 2, len(sent))
    by_key = {r.key.decode(): r for r in held}
    for key, value, headers in sent:
        r = by_key[key]
        assert r.value == value.encode()
        assert list(r.headers) == [(k, v.encode()) for k, v in headers]

    consumed = tools.ok(
        CONSOLE_CONSUMER,
        f"{b} --topic {topic} --group {group} --from-beginning --max-messages {len(sent)} "
        "--timeout-ms 30000 --property print.key=true --property print.headers=true "
        "--property print.partition=true --property print.offset=true",
    )
    assert f"Processed a total of {len(sent)} messages" in consumed.stderr
    printed = [
        line.split("\t") for line in consumed.stdout.splitlines() if line.startswith("Partition:")
    ]
    assert sorted(printed) == sorted(
        [
            f"Partition:{r.partition}",
            f"Offset:{r.offset}",
            ",".join(f"{k}:{v.decode()}" for k, v in r.headers),
            r.key.decode(),
            r.value.decode(),
        ]
        for r in held
    )
    # The group committed the end of each partition (offsets start at 0: the end is the count).
    ends = {p: sum(r.partition == p for r in held) for p in (0, 1)}
    now = committed(cluster, group)
    assert {p: now.get(p, 0) for p in (0, 1)} == ends


# -- kafka-consumer-groups ---------------------------------------------------------------


def test_kafka_consumer_groups_describes_lag_and_resets_offsets(
    cluster: Cluster, tools: KafkaTools
) -> None:
    topic = new_topic(cluster)
    group = unique("groups")
    produce(cluster, topic, {0: 5, 1: 3})
    b = f"--bootstrap-server {bootstrap(cluster)}"
    read = "--property print.partition=true --property print.offset=true --timeout-ms 30000"
    # One record per poll, so the offsets committed on close are those of the five printed.
    tools.ok(
        CONSOLE_CONSUMER,
        f"{b} --topic {topic} --group {group} --from-beginning --max-messages 5 {read} "
        "--consumer-property max.poll.records=1",
    )
    held = committed(cluster, group)
    assert sum(held.values()) == 5

    described = tools.ok(CONSUMER_GROUPS, f"{b} --describe --group {group}")
    assert f"Consumer group '{group}' has no active members." in described.output
    # A group with no members shows a row for each partition it committed (which of the
    # two partitions the five records came from depends on the order of the fetches).
    rows = {int(r["PARTITION"]): r for r in table(described.stdout)}
    ends = {0: 5, 1: 3}
    assert {p: (r["TOPIC"], int(r["LOG-END-OFFSET"])) for p, r in rows.items()} == {
        p: (topic, ends[p]) for p in held
    }
    for p, r in rows.items():
        assert (int(r["CURRENT-OFFSET"]), int(r["LAG"])) == (held[p], ends[p] - held[p])

    reset = f"{b} --reset-offsets --group {group} --topic {topic}"

    def new_offsets(ran: Ran) -> dict[int, int]:
        return {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(ran.stdout)}

    dry = tools.ok(CONSUMER_GROUPS, f"{reset} --to-earliest --dry-run")
    assert new_offsets(dry) == {0: 0, 1: 0}
    assert committed(cluster, group) == held  # a dry run changes nothing

    executed = tools.ok(CONSUMER_GROUPS, f"{reset} --to-earliest --execute")
    assert new_offsets(executed) == {0: 0, 1: 0}
    assert committed(cluster, group) == {0: 0, 1: 0}

    tools.ok(CONSUMER_GROUPS, f"{reset} --to-offset 2 --execute")
    assert committed(cluster, group) == {0: 2, 1: 2}

    # A shift past the log end stops at the log end, as in Kafka.
    tools.ok(CONSUMER_GROUPS, f"{reset} --shift-by 2 --execute")
    assert committed(cluster, group) == {0: 4, 1: 3}

    tools.ok(CONSUMER_GROUPS, f"{reset} --shift-by -3 --execute")
    assert committed(cluster, group) == {0: 1, 1: 0}

    # The group resumes from the reset point: exactly the 4 + 3 records after it.
    again = tools.ok(
        CONSOLE_CONSUMER, f"{b} --topic {topic} --group {group} --max-messages 7 {read}"
    )
    printed = sorted(
        tuple(line.split("\t")[:2])
        for line in again.stdout.splitlines()
        if line.startswith("Partition:")
    )
    assert printed == sorted(
        [("Partition:0", f"Offset:{o}") for o in range(1, 5)]
        + [("Partition:1", f"Offset:{o}") for o in range(3)]
    )
    described = tools.ok(CONSUMER_GROUPS, f"{b} --describe --group {group}")
    assert {int(r["PARTITION"]): int(r["LAG"]) for r in table(described.stdout)} == {0: 0, 1: 0}

    assert group in tools.ok(CONSUMER_GROUPS, f"{b} --list").stdout.split()
    state = tools.ok(CONSUMER_GROUPS, f"{b} --describe --group {group} --state").stdout
    shown = re.search(
        rf"^{group}\s+127\.0\.0\.1:\d+\s+\((\d+)\)\s+\S*\s+Empty\s+0\s*$", state, re.M
    )
    assert shown is not None and int(shown[1]) in cluster.brokers, state

    deleted = tools.ok(CONSUMER_GROUPS, f"{b} --delete --group {group}")
    assert f"'{group}'" in deleted.stdout and "successful" in deleted.stdout
    with Admin(cluster.bootstrap) as admin:
        assert group not in {g.group_id for g in admin.list_groups()}

    nobody = unique("nobody")
    unknown = tools.run(CONSUMER_GROUPS, f"{b} --describe --group {nobody}")
    assert f"Consumer group '{nobody}' does not exist." in unknown.output


def test_a_kip848_console_consumer_is_described_by_kafka_consumer_groups(
    cluster: Cluster, tools: KafkaTools, tmp_path: Path
) -> None:
    """The console consumer with ``group.protocol=consumer`` (ConsumerGroupHeartbeat) reads
    the topic, and kafka-consumer-groups describes its group: the member holds both
    partitions, its commits reach the log end, the broker's assignor is named."""
    topic = new_topic(cluster)
    group = unique("kip848")
    produce(cluster, topic, {0: 4, 1: 3})
    b = f"--bootstrap-server {bootstrap(cluster)}"
    consumer = tools.command(
        CONSOLE_CONSUMER,
        f"{b} --topic {topic} --group {group} --from-beginning "
        "--consumer-property group.protocol=consumer "
        "--consumer-property auto.commit.interval.ms=500",
    )
    with contextlib.ExitStack() as stack:
        out = tmp_path / "console.out"
        process = _start(stack, consumer, out)
        rows: dict[int, dict[str, str]] = {}

        def caught_up() -> bool:
            nonlocal rows
            assert process.poll() is None, out.with_name(out.name + ".err").read_text()
            ran = tools.run(CONSUMER_GROUPS, f"{b} --describe --group {group}")
            if ran.returncode != 0 or "GROUP" not in ran.stdout:
                return False
            rows = {int(r["PARTITION"]): r for r in table(ran.stdout)}
            return {p: r.get("CURRENT-OFFSET") for p, r in rows.items()} == {0: "4", 1: "3"}

        cluster.wait_for(caught_up, what="the console consumer's commits", timeout_s=90)
        (member,) = {r["CONSUMER-ID"] for r in rows.values()}
        assert member != "-" and {r["CLIENT-ID"] for r in rows.values()} == {"console-consumer"}
        state = tools.ok(CONSUMER_GROUPS, f"{b} --describe --group {group} --state")
        assert re.search(rf"{group}\s+\S+\s+\(\d+\)\s+uniform\s+Stable\s+1", state.stdout), (
            state.stdout
        )
        listed = tools.ok(CONSUMER_GROUPS, f"{b} --list --type consumer")
        assert group in listed.stdout.split()
    assert committed(cluster, group) == {0: 4, 1: 3}


# -- kafka-configs -----------------------------------------------------------------------


def test_kafka_configs_alters_and_describes_topic_configs(
    cluster: Cluster, tools: KafkaTools
) -> None:
    topic = new_topic(cluster, partitions=1)
    topic_configs = (
        f"--bootstrap-server {bootstrap(cluster)} --entity-type topics --entity-name {topic}"
    )

    def held() -> dict[str, Any]:
        with Admin(cluster.bootstrap) as admin:
            return admin.describe_configs([topic])[topic]

    done = tools.ok(
        CONFIGS,
        f"{topic_configs} --alter --add-config retention.ms=123456,cleanup.policy=[compact,delete]",
    )
    assert f"Completed updating config for topic {topic}." in done.stdout
    configs = held()
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "123456",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert configs["cleanup.policy"].value == "compact,delete"

    described = tools.ok(CONFIGS, f"{topic_configs} --describe").stdout
    assert f"Dynamic configs for topic {topic} are:" in described
    assert re.search(r"^\s+retention\.ms=123456 sensitive=false ", described, re.M)
    assert re.search(r"^\s+cleanup\.policy=compact,delete sensitive=false ", described, re.M)
    assert "segment.bytes=" not in described  # not overridden, so not a dynamic config

    everything = tools.ok(CONFIGS, f"{topic_configs} --describe --all").stdout
    assert f"All configs for topic {topic} are:" in everything
    assert re.search(r"^\s+segment\.bytes=\d+ ", everything, re.M)

    tools.ok(CONFIGS, f"{topic_configs} --alter --delete-config retention.ms")
    configs = held()
    assert configs["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"].value == "compact,delete"

    missing = tools.run(CONFIGS, f"{topic_configs} --alter --delete-config retention.ms")
    assert missing.returncode != 0 and "Invalid config(s): retention.ms" in missing.output
    bad = tools.run(CONFIGS, f"{topic_configs} --alter --add-config retention.ms=soon")
    assert bad.returncode != 0 and "retention.ms" in bad.output
    assert held()["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"


def test_kafka_configs_alters_and_describes_broker_configs(
    cluster: Cluster, tools: KafkaTools
) -> None:
    b = f"--bootstrap-server {bootstrap(cluster)} --entity-type brokers"
    broker, default = f"{b} --entity-name 1", f"{b} --entity-default"
    leader_rate, follower_rate = (
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
    )
    done = tools.ok(CONFIGS, f"{broker} --alter --add-config {leader_rate}=5000")
    assert "Completed updating config for broker 1." in done.stdout
    assert cluster.zk.get_broker_config("1") == {leader_rate: "5000"}
    described = tools.ok(CONFIGS, f"{broker} --describe").stdout
    assert "Dynamic configs for broker 1 are:" in described
    assert re.search(rf"^\s+{re.escape(leader_rate)}=5000 sensitive=false", described, re.M)

    done = tools.ok(CONFIGS, f"{default} --alter --add-config {follower_rate}=7000")
    assert "Completed updating default config for brokers in the cluster." in done.stdout
    assert cluster.zk.get_broker_config("<default>") == {follower_rate: "7000"}
    assert f"{follower_rate}=7000" in tools.ok(CONFIGS, f"{default} --describe").stdout

    # log.dirs is read-only in Kafka too: refused, and nothing changes.
    static = tools.run(CONFIGS, f"{broker} --alter --add-config log.dirs=/tmp/elsewhere")
    assert static.returncode != 0
    assert cluster.zk.get_broker_config("1") == {leader_rate: "5000"}

    tools.ok(CONFIGS, f"{broker} --alter --delete-config {leader_rate}")
    tools.ok(CONFIGS, f"{default} --alter --delete-config {follower_rate}")
    assert cluster.zk.get_broker_config("1") == {}
    assert cluster.zk.get_broker_config("<default>") == {}


# -- kafka-acls --------------------------------------------------------------------------


def _held_acls(cluster: Cluster, **pattern: Any) -> set[tuple[str, str, str, str, str, str]]:
    """``(type, name, pattern type, principal, operation, permission)`` the gRPC door sees."""
    with Admin(cluster.bootstrap) as admin:
        found = admin.describe_acls(acls.AclBindingFilter(acls.ResourcePatternFilter(**pattern)))
    return {
        (
            a.pattern.resource_type.name,
            a.pattern.name,
            a.pattern.pattern_type.name,
            str(a.entry.principal),
            a.entry.operation.name,
            a.entry.permission_type.name,
        )
        for a in found
    }


def test_kafka_acls_adds_lists_and_removes_acls(cluster: Cluster, tools: KafkaTools) -> None:
    topic, group, prefix = unique("acl"), unique("acl-group"), unique("acl-prefix")
    b = f"--bootstrap-server {bootstrap(cluster)}"
    added = tools.ok(
        ACLS,
        f"{b} --add --allow-principal User:alice --operation Read --operation Describe "
        f"--topic {topic}",
    )
    assert (
        f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, "
        "patternType=LITERAL)`" in added.stdout
    )
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
    tools.ok(
        ACLS, f"{b} --add --consumer --allow-principal User:bob --topic {topic} --group {group}"
    )
    tools.ok(
        ACLS,
        f"{b} --add --deny-principal User:mallory --operation Write --topic {prefix} "
        "--resource-pattern-type prefixed",
    )

    topic_acls = {
        ("TOPIC", topic, "LITERAL", "User:alice", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:alice", "DESCRIBE", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:bob", "READ", "ALLOW"),
        ("TOPIC", topic, "LITERAL", "User:bob", "DESCRIBE", "ALLOW"),
    }
    assert _held_acls(cluster, resource_type=acls.ResourceType.TOPIC, name=topic) == topic_acls
    assert _held_acls(cluster, resource_type=acls.ResourceType.GROUP, name=group) == {
        ("GROUP", group, "LITERAL", "User:bob", "READ", "ALLOW")
    }
    assert _held_acls(cluster, resource_type=acls.ResourceType.TOPIC, name=prefix) == {
        ("TOPIC", prefix, "PREFIXED", "User:mallory", "WRITE", "DENY")
    }

    listed = tools.ok(ACLS, f"{b} --list --topic {topic}").stdout
    assert f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}" in listed
    for _, _, _, principal, operation, permission in topic_acls:
        entry = f"principal={principal}, host=*, operation={operation}, permissionType={permission}"
        assert f"({entry})" in listed

    tools.ok(
        ACLS,
        f"{b} --remove --force --allow-principal User:alice --operation Read --topic {topic}",
    )
    assert _held_acls(cluster, resource_type=acls.ResourceType.TOPIC, name=topic) == topic_acls - {
        ("TOPIC", topic, "LITERAL", "User:alice", "READ", "ALLOW")
    }
    tools.ok(ACLS, f"{b} --remove --force --topic {topic}")
    tools.ok(ACLS, f"{b} --remove --force --group {group}")
    tools.ok(ACLS, f"{b} --remove --force --topic {prefix} --resource-pattern-type prefixed")
    for name in (topic, group, prefix):
        assert _held_acls(cluster, name=name) == set()
    assert f"name={topic}" not in tools.ok(ACLS, f"{b} --list --topic {topic}").stdout


# -- verifiable producer and consumer across a leader kill -------------------------------


def _events(path: Path) -> list[dict[str, Any]]:
    """The JSON events a verifiable client printed (one per line; other lines skipped)."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line still being written
    return out


def _acked(producer_out: Path) -> dict[int, str]:
    """Offset -> value of each record the verifiable producer saw acknowledged."""
    return {
        e["offset"]: e["value"]
        for e in _events(producer_out)
        if e["name"] == "producer_send_success"
    }


def _consumed(consumer_out: Path) -> dict[int, str]:
    """Offset -> value of each record the verifiable consumer printed (``--verbose``)."""
    return {e["offset"]: e["value"] for e in _events(consumer_out) if e["name"] == "record_data"}


@pytest.mark.slow
def test_verifiable_clients_lose_no_acknowledged_record_when_the_leader_dies(
    tools: KafkaTools, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """12,000 records at 1,000/s with acks=all into one RF=3 partition (min.insync.replicas
    2) while a group consumes it; the leader is killed (SIGKILL) a third of the way in."""
    work = tmp_path_factory.mktemp("verifiable")
    overrides = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": "3000",
        "zookeeper.session.timeout.ms": "6000",
    }
    with _kafka_cluster(3, work / "cluster", **overrides) as trio:
        topic = unique("verifiable")
        with Admin(trio.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, 3)], timeout_ms=15000)
        trio.wait_for(lambda: len(trio.isr_for(topic, 0)) == 3, what="a full ISR")
        leader = trio.leader_for(topic, 0)
        b = f"--bootstrap-server {bootstrap(trio)} --topic {topic}"
        consume = f"{b} --group-id {unique('verifiable')} --reset-policy earliest --verbose"
        produce = f"{b} --max-messages 12000 --throughput 1000 --acks -1"
        producer_out, consumer_out = work / "producer.jsonl", work / "consumer.jsonl"
        with contextlib.ExitStack() as stack:
            consumer = _start(stack, tools.command(VERIFIABLE_CONSUMER, consume), consumer_out)
            producer = _start(stack, tools.command(VERIFIABLE_PRODUCER, produce), producer_out)
            deadline = time.monotonic() + 60
            while max(_acked(producer_out), default=-1) < 4000 and time.monotonic() < deadline:
                time.sleep(0.2)
            acked_before_kill = max(_acked(producer_out), default=-1)
            assert leader is not None and acked_before_kill >= 4000
            trio.kill(leader)
            assert producer.wait(timeout=180) == 0, (work / "producer.jsonl.err").read_text()
            acked = _acked(producer_out)
            deadline = time.monotonic() + 90
            while not acked.keys() <= _consumed(consumer_out).keys():
                assert consumer.poll() is None, (work / "consumer.jsonl.err").read_text()
                if time.monotonic() > deadline:
                    break
                time.sleep(1)
        seen = _consumed(consumer_out)
        assert trio.leader_for(topic, 0) not in (None, leader)
        assert max(acked) > acked_before_kill + 1000, "the new leader acknowledged little"
        lost = sorted(acked.keys() - seen.keys())
        assert not lost, f"{len(lost)} acknowledged records never consumed, first {lost[:5]}"
        assert {o: seen[o] for o in acked} == acked


def _start(stack: contextlib.ExitStack, command: list[str], out: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` with stdout to ``out`` (stderr beside it); stopped when ``stack``
    closes (SIGTERM: the tools' shutdown hooks close their clients)."""
    stdout = stack.enter_context(out.open("w"))
    stderr = stack.enter_context(out.with_name(out.name + ".err").open("w"))
    process = subprocess.Popen(command, stdout=stdout, stderr=stderr)

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stack.callback(stop)
    return process
