"""Every page and action of the console against real brokers, through HTTP as a browser
sends it (cookies, CSRF tokens, forms), each checked against what the cluster then holds."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from headwater import errors
from headwater.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from headwater.testing import Cluster

from tests.e2e.console.web import WebClient, serve_console

pytestmark = pytest.mark.e2e


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for_leaders(bootstrap: str, topic: str, partitions: int) -> None:
    """Until every partition of the new ``topic`` has a leader.  The broker asked may not
    know the topic yet (its metadata cache hears of it after the controller creates it):
    UNKNOWN_TOPIC_OR_PARTITION is "not yet" here."""
    with Admin(bootstrap) as admin:
        for _ in range(400):
            try:
                desc = admin.describe_topics([topic])[topic]
            except errors.UnknownTopicOrPartitionError:
                desc = None
            parts = desc.partitions if desc is not None else []
            if len(parts) == partitions and all(p.leader >= 0 for p in parts):
                return
            time.sleep(0.05)
    raise AssertionError(f"{topic} never got {partitions} partitions with leaders")


def make_topic(web: WebClient, cluster: Cluster, partitions: int = 1, **form: str) -> str:
    name = unique("t")
    page = web.post(
        "/topics",
        {"name": name, "partitions": str(partitions), "replication_factor": "2", **form},
    )
    assert page.status == 200, page.message()
    assert page.message() == f"Created topic {name}."
    wait_for_leaders(cluster.bootstrap, name, partitions)
    return name


def test_the_cluster_page(web: WebClient, cluster: Cluster) -> None:
    page = web.get("/cluster")
    assert page.status == 200
    assert page.has("racks: r1, r2")
    controller = cluster.controller_id()
    assert page.has(f"Controller: broker {controller}")
    for broker in cluster.brokers.values():
        assert page.has(broker.address)
    assert 'id="under-replicated-count">0<' in page.text
    assert 'id="offline-count">0<' in page.text
    assert 'id="moves-count">0<' in page.text
    assert "Content-Security-Policy" in page.headers
    assert web.get("/").status == 200  # redirected to the cluster page


def test_create_describe_grow_and_delete_a_topic(web: WebClient, cluster: Cluster) -> None:
    name = make_topic(web, cluster, 2, configs="retention.ms=123456\ncleanup.policy=compact")
    assert web.get("/topics").has(name)
    page = web.get(f"/topics/{name}")
    assert page.status == 200
    assert page.has("retention.ms</td><td>123456</td><td>DYNAMIC_TOPIC_CONFIG")
    assert page.text.count("<tr><td>") >= 2  # a row per partition
    with Admin(cluster.bootstrap) as admin:
        desc = admin.describe_topics([name])[name]
        for p in desc.partitions:
            isr = ",".join(map(str, p.isr))
            assert page.has(f"<td>{p.partition}</td><td>{p.leader}</td>"), p
            assert page.has(f"<td>{isr}</td>")

    page = web.post(
        f"/topics/{name}/configs", {"set": "retention.ms=654321", "delete": "cleanup.policy"}
    )
    assert page.message() == (f"Topic {name}: set retention.ms=654321, deleted cleanup.policy."), (
        page.message()
    )
    with Admin(cluster.bootstrap) as admin:
        configs = admin.describe_configs([name])[name]
    assert configs["retention.ms"].value == "654321"
    assert configs["cleanup.policy"].source != "DYNAMIC_TOPIC_CONFIG"
    page = web.post(f"/topics/{name}/configs", {"set": "retention.ms=soon"})
    assert page.status == 409
    assert "INVALID_CONFIG" in page.message()

    page = web.post(f"/topics/{name}/partitions", {"partitions": "2"})
    assert page.status == 400
    assert "the topic has 2 partitions; the new total must be more" in page.message()
    page = web.post(f"/topics/{name}/partitions", {"partitions": "3"})
    assert page.message() == f"Topic {name} now has 3 partitions."
    with Admin(cluster.bootstrap) as admin:
        assert len(admin.describe_topics([name])[name].partitions) == 3

    page = web.post(f"/topics/{name}/delete", {"confirm": "not-it"})
    assert page.status == 400
    assert f"type the topic's name ({name}) to delete it" in page.message()
    page = web.post(f"/topics/{name}/delete", {"confirm": name})
    assert page.message() == f"Deleted topic {name}."
    # DeleteTopics answered NONE: the serving broker no longer lists the topic; the
    # other learns of it from the controller's UpdateMetadata, which a loaded machine
    # may delay by seconds (a client waits for metadata the same way).
    with Admin(cluster.bootstrap) as admin:
        deadline = time.monotonic() + 60
        while name in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert name not in admin.list_topics()


def test_the_clusters_refusals_are_shown(web: WebClient, cluster: Cluster) -> None:
    name = make_topic(web, cluster)
    page = web.post("/topics", {"name": name})
    assert page.status == 409
    assert page.message().startswith("The cluster refused: TOPIC_ALREADY_EXISTS")
    page = web.post("/topics", {"name": unique("t"), "replication_factor": "3"})
    assert page.status == 409
    assert "INVALID_REPLICATION_FACTOR" in page.message()
    page = web.get(f"/topics/{unique('missing')}")
    assert page.status == 404
    assert "UNKNOWN_TOPIC_OR_PARTITION" in page.message()


def test_bad_input_changes_nothing(web: WebClient, cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        before = admin.list_topics()
    for form, says in [
        ({"name": "a/b"}, "has characters a topic name cannot have"),
        ({"name": "x" * 250}, "at most 249 characters"),
        ({"name": "ok", "partitions": "-1"}, "partitions: -1 is out of range"),
        ({"name": "ok", "configs": "no equals sign"}, "line 1: expected name=value"),
    ]:
        page = web.post("/topics", form)
        assert page.status == 400, form
        assert says in page.message()
    page = web.post("/topics", {"name": "forged"}, token="f" * 64)
    assert page.status == 403
    assert "CSRF token does not match" in page.message()
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_topics() == before


def test_produce_and_browse(web: WebClient, cluster: Cluster) -> None:
    name = make_topic(web, cluster, 2)
    page = web.post(
        f"/topics/{name}/messages?partition=1",
        {"partition": "1", "key": "k1", "value": '{"n": 1}', "headers": "trace: abc"},
    )
    assert page.message() == f"Produced to {name}, partition 1 at offset 0."
    assert page.has('<pre class="value">{"n": 1}</pre>')
    page = web.get(f"/topics/{name}/messages", partition=1, format="json")
    assert page.has('{\n  "n": 1\n}')
    assert page.has("trace: abc")
    assert page.has("<pre>k1</pre>")
    page = web.get(f"/topics/{name}/messages", partition=1, format="hex")
    assert page.has("6b31")  # "k1"

    with Producer(cluster.bootstrap, linger_ms=0) as producer:
        first = int(time.time() * 1000)
        for i in range(150):
            producer.send(name, f"v{i}".encode(), partition=0, timestamp_ms=first + i)
        producer.flush()
    page = web.get(f"/topics/{name}/messages", partition=0, start="offset", offset=10, limit=100)
    assert page.status == 200
    assert page.has("100 records from offset 10")
    assert page.has('<pre class="value">v10</pre>') and page.has('<pre class="value">v109</pre>')
    assert not page.has('<pre class="value">v110</pre>')
    page = web.get(f"/topics/{name}/messages", partition=0, start="newest", limit=5)
    assert page.has("5 records from offset 145")
    page = web.get(
        f"/topics/{name}/messages", partition=0, start="timestamp", timestamp=first + 140
    )
    assert page.has("10 records from offset 140")
    page = web.get(f"/topics/{name}/messages", partition=0, start="oldest", limit=500)
    assert page.has("150 records from offset 0")

    for params, says in [
        ({"limit": 501}, "limit: 501 is out of range; expected 1 to 500"),
        ({"partition": 2}, "partition: 2 is out of range; expected 0 to 1"),
        ({"start": "offset", "offset": "-3"}, "offset: -3 is out of range"),
        ({"start": "offset", "offset": "ten"}, "offset: 'ten' is not a whole number"),
        ({"start": "timestamp", "timestamp": "noon"}, "timestamp: 'noon' is not a time"),
    ]:
        page = web.get(f"/topics/{name}/messages", **params)
        assert page.status == 400, params
        assert says in page.message()
    page = web.post(f"/topics/{name}/messages", {"partition": "7", "value": "x"})
    assert page.status == 400
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    with Admin(cluster.bootstrap) as admin:
        ends = admin.list_offsets({tp0: "latest", tp1: "latest"})
    assert {tp: o.offset if o else None for tp, o in ends.items()} == {tp0: 150, tp1: 1}


def test_groups_lag_and_reset_offsets(web: WebClient, cluster: Cluster) -> None:
    name = make_topic(web, cluster, 2)
    group = unique("g <&>")
    with Producer(cluster.bootstrap, linger_ms=0) as producer:
        for i in range(20):
            producer.send(name, b"v", partition=i % 2)
        producer.flush()
    consumer = Consumer(
        name,
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 14 and time.monotonic() < deadline:
            seen += len(consumer.poll(1000, max_records=14 - seen))
        consumer.commit()
        page = web.get("/groups")
        assert page.has(group)
        page = web.get("/group", id=group)
        assert page.status == 200
        assert page.has("State Stable")
        assert page.has('<span id="total-lag">6</span>')
        page = web.post("/group/reset", {"group": group, "topic": name, "spec": "to-earliest"})
        assert page.status == 409
        assert "NON_EMPTY_GROUP" in page.message() and "active members" in page.message()
    finally:
        consumer.close()

    with Admin(cluster.bootstrap) as admin:
        for _ in range(200):
            if admin.describe_groups([group])[group].state == "Empty":
                break
            time.sleep(0.1)
        before = admin.list_consumer_group_offsets(group)
    page = web.post(
        "/group/reset", {"group": group, "topic": name, "spec": "to-earliest", "mode": "dry-run"}
    )
    assert page.status == 200, page.message()
    assert page.message() == f"Dry run: group {group} would move to these offsets on {name}."
    for tp, om in before.items():
        assert page.has(f"<tr><td>{tp.partition}</td><td>{om.offset}</td><td>0</td></tr>")
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group) == before

    page = web.post(
        "/group/reset",
        {"group": group, "topic": name, "spec": "shift-by", "value": "-2", "mode": "execute"},
    )
    assert page.message() == f"Committed new offsets of group {group} on {name}."
    with Admin(cluster.bootstrap) as admin:
        after = admin.list_consumer_group_offsets(group)
    assert {tp: om.offset for tp, om in after.items()} == {
        tp: om.offset - 2 for tp, om in before.items()
    }
    page = web.get("/group", id=group)
    assert page.has('<span id="total-lag">10</span>')

    page = web.post("/group/reset", {"group": group, "topic": name, "spec": "to-offset"})
    assert page.status == 400
    assert "value: '' is not a whole number" in page.message()

    time.sleep(1.1)  # the console samples a group's lag at most once a second
    page = web.get("/group", id=group)
    assert '<polyline class="lag series-0"' in page.text
    assert page.has(f"{name}-0 (")  # a partition's own line

    page = web.post("/group/delete", {"group": group, "confirm": group})
    assert page.message() == f"Deleted group {group}."
    with Admin(cluster.bootstrap) as admin:
        assert group not in [g.group_id for g in admin.list_groups()]


def test_read_only_refuses_changes(cluster: Cluster) -> None:
    name = unique("t")
    with serve_console(cluster.bootstrap, read_only=True) as running:
        web = WebClient(running.url)
        assert web.get("/topics").has("Read-only console")
        page = web.post("/topics", {"name": name})
        assert page.status == 403
        assert page.message() == "The console is read-only: it changes nothing."
    with Admin(cluster.bootstrap) as admin:
        assert name not in admin.list_topics()


def test_live_sections_poll_their_own_page(web: WebClient) -> None:
    """The live sections poll their own page: what htmx swaps in is what the page has."""
    page = web.get("/topics")
    assert 'hx-get="/topics" hx-trigger="every 3s" hx-select="#live"' in page.text
    assert json.loads(page.text.split('name="htmx-config" content=\'')[1].split("'")[0]) == {
        "includeIndicatorStyles": False,
        "allowEval": False,
        "allowScriptTags": False,
        "selfRequestsOnly": True,
        "historyCacheSize": 0,
    }


def test_a_reassignment_shows_with_its_progress(cluster: Cluster, web: WebClient) -> None:
    """A throttled move of a partition onto broker 1: the cluster page shows it with the
    bytes its new replica has copied, the figure grows, and the row goes when it is done."""
    name = unique("moving")
    tp = TopicPartition(name, 0)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, replica_assignment={0: [0]})])
        with Producer(cluster.bootstrap, linger_ms=20) as producer:
            for _ in range(2048):
                producer.send(name, b"m" * 1024, partition=0)
            producer.flush()
        rate = "200000"  # bytes/s: about ten seconds for the 2 MiB
        admin.alter_broker_configs(
            None,
            {
                "leader.replication.throttled.rate": rate,
                "follower.replication.throttled.rate": rate,
            },
        )
        admin.alter_topic_configs(
            name,
            set_configs={
                "leader.replication.throttled.replicas": "0:0",
                "follower.replication.throttled.replicas": "0:1",
            },
        )
        try:
            assert admin.alter_partition_reassignments({tp: [0, 1]}) == {tp: None}
            seen: list[int] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                moves = web.get("/cluster").text.partition('<table id="moves">')[2]
                row = re.search(rf"{name}</a>-0</td>.*?</tr>", moves)
                if row is None:
                    break
                assert "<td>0,1</td><td>1</td><td></td>" in row.group(0)
                assert "0 of 1 in sync" in row.group(0)
                copied = re.search(r"([\d.]+ (?:B|KiB|MiB)) of ([\d.]+ MiB) copied", row.group(0))
                assert copied is not None, row.group(0)
                percent = re.search(r'class="move-progress">(\d+)%', row.group(0))
                assert percent is not None
                seen.append(int(percent.group(1)))
                time.sleep(1)
            assert len(seen) >= 2, "the move was over before the page showed it twice"
            assert seen == sorted(seen) and seen[-1] > seen[0], seen
            assert max(seen) < 100
        finally:
            admin.alter_broker_configs(
                None,
                {
                    "leader.replication.throttled.rate": None,
                    "follower.replication.throttled.rate": None,
                },
            )
        deadline = time.monotonic() + 60
        while tp in admin.list_partition_reassignments() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert tp not in admin.list_partition_reassignments()
    page = web.get("/cluster")
    assert f"{name}</a>-0" not in page.text.partition("Reassignments in progress")[2]
