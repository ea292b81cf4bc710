"""The Python snippets of README.md and docs/spark.md, run as written against a real cluster.

Each ```python block is taken from the document and executed with only its
bootstrap address replaced by the test cluster's (one real broker,
``headwater.testing.Cluster``) and, for the Spark blocks, ``spark`` bound to a
real local[2] SparkSession.  A snippet that a new user would copy and see fail
(a wrong argument, a missing ``.mode("append")``) fails here; what the snippets
write is then read back and checked.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import headwater
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
SPARK_DOC = ROOT / "docs" / "spark.md"

# The addresses the documents use; each is replaced by the test cluster's bootstrap.
DOC_BOOTSTRAPS = ("127.0.0.1:9092", "hw-headwater-bootstrap:9092")


def python_blocks(path: Path) -> list[str]:
    """Every fenced ```python block of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def block_with(path: Path, marker: str) -> str:
    """The one ```python block of ``path`` that contains ``marker``."""
    found = [b for b in python_blocks(path) if marker in b]
    assert len(found) == 1, f"{path.name}: {len(found)} python blocks contain {marker!r}"
    return found[0]


def localized(code: str, bootstrap: str) -> str:
    """``code`` with the documents' bootstrap addresses pointed at ``bootstrap``."""
    addresses = set(re.findall(r'"([\w.-]+:\d+)"', code))
    assert addresses <= set(DOC_BOOTSTRAPS), f"addresses the test does not know: {addresses}"
    for address in DOC_BOOTSTRAPS:
        code = code.replace(address, bootstrap)
    return code


def run(code: str, **names: Any) -> str:
    """Execute ``code`` with ``names`` as its globals; returns what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<snippet>", "exec"), dict(names))
    return out.getvalue()


def values_of(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` values of ``topic`` (every partition), read from the start."""
    got: list[bytes] = []
    with headwater.Consumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        for _ in range(100):
            got.extend(r.value for r in consumer.poll(timeout_ms=200) if r.value is not None)
            if len(got) >= count:
                break
    return got


def test_the_snippets_are_found() -> None:
    """Every python block is run below: a new one needs its test here."""
    assert len(python_blocks(README)) == 3
    assert len(python_blocks(SPARK_DOC)) == 2
    assert all("bootstrap" in block for block in python_blocks(README))


def test_readme_producer_and_consumer(cluster: Any, make_topic: Callable[..., str]) -> None:
    code = block_with(README, 'group_id="billing"')
    topic = make_topic(1)
    code = localized(code.replace('"orders"', repr(topic)), cluster.bootstrap)

    printed = run(code)

    # partition offset value, one line per record: the one record the snippet sent.
    assert printed.splitlines() == ["0 0 b'hello'"]
    with headwater.Admin(cluster.bootstrap) as admin:
        committed = admin.list_consumer_group_offsets("billing")
    assert {tp.topic: meta.offset for tp, meta in committed.items()} == {topic: 1}


def test_readme_transactions(cluster: Any, make_topic: Callable[..., str]) -> None:
    code = block_with(README, "transactional_id=")
    topic = make_topic(1)
    code = localized(code.replace('"orders"', repr(topic)), cluster.bootstrap)

    printed = run(code)

    # The committed transaction's two records, in send order, seen by read_committed.
    assert printed.splitlines() == ["b'user-1' b'paid'", "b'user-2' b'paid'"]


def test_readme_spark_read_and_write(
    cluster: Any, spark: Any, make_topic: Callable[..., str]
) -> None:
    source, sink = make_topic(2), make_topic(1)
    with headwater.Producer(cluster.bootstrap) as producer:
        for i in range(10):
            producer.send(source, key=f"k{i}".encode(), value=f"order-{i}".encode())
    code = block_with(README, "headwater_spark.register(spark)")
    code = code.replace('"orders-upper"', repr(sink)).replace('"orders"', repr(source))

    run(localized(code, cluster.bootstrap), spark=spark)

    got = values_of(cluster.bootstrap, sink, 10)
    assert sorted(got) == sorted(f"ORDER-{i}".encode() for i in range(10))


def test_spark_doc_read_then_write(
    cluster: Any, spark: Any, make_topic: Callable[..., str]
) -> None:
    source, sink = make_topic(1), make_topic(1)
    with headwater.Producer(cluster.bootstrap) as producer:
        producer.send(source, value=b"x").result(timeout=10)
    read = block_with(SPARK_DOC, "spark.read.format")
    write = block_with(SPARK_DOC, ".write.format")

    names: dict[str, Any] = {"spark": spark}
    exec(localized(read.replace('"orders"', repr(source)), cluster.bootstrap), names)
    assert [bytes(row.value) for row in names["df"].collect()] == [b"x"]

    # The write snippet's df has an `id` column: three rows of one.
    run(
        localized(write.replace('"orders"', repr(sink)), cluster.bootstrap),
        df=spark.range(3),
    )
    got = values_of(cluster.bootstrap, sink, 3)
    assert sorted(got) == [b'{"id":0}', b'{"id":1}', b'{"id":2}']
