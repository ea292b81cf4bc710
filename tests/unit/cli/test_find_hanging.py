"""``headwater transactions find-hanging``: which open transactions are hanging (Kafka's
rule: older than the longest transaction timeout and not held by their coordinator),
and its refusals of bad arguments."""

from __future__ import annotations

import pytest
from headwater.cli.main import main
from headwater.cli.transactions import (
    OpenTransaction,
    hanging_transactions,
    stale_open_transactions,
)
from headwater.client import TopicPartition
from headwater.client.admin.transactions import ProducerState, TransactionDescription

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
MINUTE = 60_000
NOW = 100 * MINUTE


def described(pid: int, state: str, *partitions: TopicPartition) -> TransactionDescription:
    return TransactionDescription(f"tx-{pid}", state, pid, 3, 60_000, 0, partitions, "h:1")


def test_only_transactions_older_than_the_max_timeout_are_candidates() -> None:
    producers = {
        TP0: [
            ProducerState(1, 3, 7, 40, NOW - 16 * MINUTE),  # open, 16 minutes quiet
            ProducerState(2, 0, 9, -1, NOW - 60 * MINUTE),  # nothing open
            ProducerState(3, 1, 2, 50, NOW - 5 * MINUTE),  # open, but recent
        ],
        TP1: [ProducerState(4, 0, 0, 10, -1)],  # open, no known timestamp
    }
    found = stale_open_transactions(producers, now_ms=NOW, max_transaction_timeout_ms=15 * MINUTE)
    assert found == [
        OpenTransaction("t", 0, 1, 3, 40, NOW - 16 * MINUTE, 16),
        OpenTransaction("t", 1, 4, 0, 10, -1, -1),
    ]


def test_a_transaction_its_coordinator_holds_is_not_hanging() -> None:
    a = OpenTransaction("t", 0, 1, 3, 40, 0, 20)
    b = OpenTransaction("t", 1, 1, 3, 12, 0, 20)
    c = OpenTransaction("t", 0, 2, 0, 41, 0, 20)
    d = OpenTransaction("t", 0, 5, 0, 42, 0, 20)
    coordinator = [
        described(1, "Ongoing", TP0),  # holds a but not b: b hangs
        described(2, "CompleteCommit", TP0),  # ended: c's marker never arrived
    ]
    assert hanging_transactions([a, b, c, d], coordinator) == [b, c, d]
    assert hanging_transactions([a], [described(1, "PrepareAbort", TP0)]) == []


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        ([], "exactly one of --topic or --broker-id"),
        (["--topic", "t", "--broker-id", "1"], "exactly one of --topic or --broker-id"),
        (["--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
        (["--topic", "t", "--max-transaction-timeout", "-1"], "must be >= 0"),
    ],
)
def test_bad_arguments_are_refused_before_any_connection(
    capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    code = main(["transactions", "find-hanging", "--bootstrap-server", "127.0.0.1:1", *argv])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    assert reason in err
