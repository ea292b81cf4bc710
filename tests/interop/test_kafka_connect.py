"""Apache Kafka Connect (3.9.1, standalone mode) against Headwater's Kafka listener.

Kafka Connect's standalone worker (``ConnectStandalone``, jars from Maven Central put in
``.tools/kafka-connect`` by ``scripts/fetch-interop-slow.sh``) runs Kafka's own
FileStream connectors against a two-broker cluster's Kafka listener: FileStreamSource
tails an input file into a one-partition topic, FileStreamSink writes the topic out to
another file.  What is asserted:

* the lines arrive complete and in order, in the topic (read back with Headwater's gRPC
  client: one record per line, offsets 0.., no key) and in the output file;
* Connect's own offsets work across a clean restart (SIGTERM, lines appended while it is
  down, started again): the source resumes from the file position it stored
  (``offset.storage.file.filename``), the sink from the offset it committed to the
  group ``connect-<name>`` on Headwater, so after a clean stop there is no duplicate at
  all: the topic and the output file hold each line exactly once, and the group's
  committed offset is the topic's end;
* after a SIGKILL (no offsets flushed at the end) Connect is at least once: every line
  arrives, nothing unknown appears, and a line seen twice is only ever a replay, i.e.
  the topic and the output file are runs of consecutive input lines, each run starting at
  or before the first line not delivered yet (no gap, no reordering).  FileStreamSink
  writes a line and its newline in two writes, so a kill between them can join two lines
  in the output file; such a joined line is split back before the check.

Slow (three JVM starts of the worker): ``make interop-slow``.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from headwater.client import Consumer, TopicPartition
from headwater.testing import Cluster
from headwater.testing.zookeeper import free_port

from .slow_tools import connect_dir, fetched
from .test_kafka_listener import cluster, kafka_bootstrap, new_topic  # noqa: F401 (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

WORKER_START_TIMEOUT_S = 180.0
"""A worker JVM starts in about 10 s on an idle machine; this allows for a loaded one."""

LINE = re.compile(r"line-\d{5} ")


def lines(first: int, count: int) -> list[str]:
    """Distinct input lines of several lengths, ASCII only: FileStreamSourceTask counts the
    position it stores in characters but skips that many bytes when it resumes, so a
    multi-byte character would make it resume inside a line (Kafka's connector, not the
    listener)."""
    return [f"line-{i:05d} {'x' * (i % 13)}" for i in range(first, first + count)]


class Worker:
    """One Kafka Connect standalone worker with a FileStream source and sink."""

    def __init__(
        self, classpath: str, workdir: Path, bootstrap: str, topic: str, name: str
    ) -> None:
        self.classpath = classpath
        self.topic = topic
        self.workdir = workdir
        self.input = workdir / "input.txt"
        self.output = workdir / "output.txt"
        self.log = workdir / "connect.log"
        self.group = f"connect-{name}-sink"
        self.proc: subprocess.Popen[bytes] | None = None
        (workdir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.log}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        (workdir / "worker.properties").write_text(
            f"bootstrap.servers={bootstrap}\n"
            "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
            "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
            f"offset.storage.file.filename={workdir / 'connect.offsets'}\n"
            "offset.flush.interval.ms=1000\n"
            f"listeners=http://127.0.0.1:{free_port()}\n"
        )
        (workdir / "source.properties").write_text(
            f"name={name}-source\n"
            "connector.class=org.apache.kafka.connect.file.FileStreamSourceConnector\n"
            "tasks.max=1\n"
            f"file={self.input}\n"
            f"topic={topic}\n"
        )
        (workdir / "sink.properties").write_text(
            f"name={name}-sink\n"
            "connector.class=org.apache.kafka.connect.file.FileStreamSinkConnector\n"
            "tasks.max=1\n"
            f"file={self.output}\n"
            f"topics={topic}\n"
        )

    def start(self) -> None:
        with self.log.open("a") as log:
            log.write("---- worker starting\n")
        with (self.workdir / "connect.stderr").open("ab") as stderr:
            self.proc = subprocess.Popen(
                [
                    "java",
                    "-Xmx512m",
                    f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                    "-cp",
                    self.classpath,
                    "org.apache.kafka.connect.cli.ConnectStandalone",
                    str(self.workdir / "worker.properties"),
                    str(self.workdir / "source.properties"),
                    str(self.workdir / "sink.properties"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop the worker (SIGTERM: Connect's shutdown hook stops the tasks and commits)."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            pytest.fail(f"the Connect worker did not stop on {sig.name}:\n{self.log_tail()}")
        self.proc = None

    def log_tail(self, n: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        stderr = self.workdir / "connect.stderr"
        err = stderr.read_text(errors="replace") if stderr.exists() else ""
        return "\n".join(text.splitlines()[-n:] + err.splitlines()[-20:])

    def append(self, new: list[str]) -> None:
        with self.input.open("a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in new)

    def output_lines(self) -> list[str]:
        """The output file's lines; a line two writes joined (see the module) is split."""
        if not self.output.exists():
            return []
        got: list[str] = []
        for line in self.output.read_text(encoding="utf-8").splitlines():
            starts = [m.start() for m in LINE.finditer(line)]
            if len(starts) > 1:
                got += [line[a:b] for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
            else:
                got.append(line)
        return got

    def wait_until(self, done: Callable[[], bool], what: str, every_s: float = 0.5) -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if done():
                return
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(
                    f"the Connect worker exited ({self.proc.returncode}):\n{self.log_tail()}"
                )
            time.sleep(every_s)
        pytest.fail(f"timed out waiting for {what}:\n{self.log_tail()}")


def delivered_at_least_once(got: list[str], expected: list[str]) -> int:
    """How many lines of ``got`` are replays; fails unless ``got`` is ``expected`` delivered at
    least once: runs of consecutive expected lines, each starting at or before the first line
    not delivered yet, ending with every line delivered."""
    index = {line: i for i, line in enumerate(expected)}
    unknown = [line for line in got if line not in index]
    assert not unknown, f"lines that were never written: {unknown[:5]}"
    delivered = 0  # expected[:delivered] have all arrived
    previous = -2
    for line in got:
        i = index[line]
        if i != previous + 1:
            assert i <= delivered, (
                f"{line!r} arrived before {expected[delivered]!r} (a gap or reordering)"
            )
        delivered = max(delivered, i + 1)
        previous = i
    assert delivered == len(expected), f"{len(expected) - delivered} lines never arrived"
    return len(got) - len(expected)


def topic_values(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes | None, str]]:
    """``(offset, key, value)`` of the topic's first ``count`` records, read over gRPC."""
    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning(TopicPartition(topic, 0))
        got: list[tuple[int, bytes | None, str]] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got += [(r.offset, r.key, (r.value or b"").decode()) for r in consumer.poll(1000)]
        return got
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer(bootstrap_servers=bootstrap)
    try:
        return consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


@pytest.fixture
def worker(cluster: Cluster, tmp_path: Path) -> Iterator[Worker]:  # noqa: F811
    directory = fetched("connect", connect_dir())
    topic = new_topic(cluster, partitions=1)
    w = Worker(
        f"{directory}/*", tmp_path, kafka_bootstrap(cluster), topic, f"fs-{uuid.uuid4().hex[:8]}"
    )
    try:
        yield w
    finally:
        if w.proc is not None:
            with contextlib.suppress(Exception):
                w.stop(signal.SIGKILL)


def test_file_source_and_sink_move_every_line_in_order_and_resume_after_a_clean_restart(
    cluster: Cluster,  # noqa: F811
    worker: Worker,
) -> None:
    topic = worker.topic
    first = lines(0, 500)
    worker.append(first)
    worker.start()
    worker.wait_until(lambda: len(worker.output_lines()) >= len(first), "the first 500 lines")
    assert worker.output_lines() == first
    assert topic_values(cluster.bootstrap, topic, len(first)) == [
        (i, None, line) for i, line in enumerate(first)
    ]

    worker.stop()
    assert committed(cluster.bootstrap, worker.group, topic) == len(first)
    second = lines(500, 300)
    worker.append(second)
    worker.start()
    expected = first + second
    worker.wait_until(lambda: len(worker.output_lines()) >= len(expected), "all 800 lines")
    # Give a replay (a source re-reading the file, a sink re-reading the topic) time to show.
    time.sleep(3)
    assert worker.output_lines() == expected
    assert end_offset(cluster.bootstrap, topic) == len(expected)
    assert [v for _, _, v in topic_values(cluster.bootstrap, topic, len(expected))] == expected
    worker.wait_until(
        lambda: committed(cluster.bootstrap, worker.group, topic) == len(expected),
        "the sink's commit of offset 800",
    )
    worker.stop()


def test_after_a_kill_the_worker_resumes_at_least_once(
    cluster: Cluster,  # noqa: F811
    worker: Worker,
) -> None:
    topic = worker.topic
    first = lines(0, 20000)
    worker.append(first)
    worker.start()
    # Killed as soon as the sink has written anything: within about a second of the first
    # records, before most offsets are flushed or committed, so some lines are replayed.
    worker.wait_until(
        lambda: worker.output.exists() and worker.output.stat().st_size > 0,
        "the first lines",
        every_s=0.05,
    )
    worker.stop(signal.SIGKILL)
    second = lines(20000, 200)
    worker.append(second)
    worker.start()
    expected = first + second

    def all_arrived() -> bool:
        try:
            delivered_at_least_once(worker.output_lines(), expected)
        except AssertionError:
            return False
        return True

    worker.wait_until(all_arrived, "every line in the output file")
    worker.stop()
    replays = delivered_at_least_once(worker.output_lines(), expected)
    in_topic = end_offset(cluster.bootstrap, topic)
    records = topic_values(cluster.bootstrap, topic, in_topic)
    assert [o for o, _, _ in records] == list(range(in_topic))
    topic_replays = delivered_at_least_once([v for _, _, v in records], expected)
    print(f"replayed after the kill: {topic_replays} in the topic, {replays} in the output file")
