"""`headwater broker` refuses bad config with one line naming the key; metrics exposition."""

from __future__ import annotations

import pytest
from headwater.cli.main import main
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.server.metrics import BrokerMetrics, PartitionSnapshot
from prometheus_client import generate_latest


def test_broker_command_reports_bad_config(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["broker", "--override", "broker.id=0", "--override", "num.partitions=x"])
    assert code == 1
    err = capsys.readouterr().err
    assert "num.partitions" in err and err.count("\n") == 1


def test_metrics_exposition() -> None:
    metrics = BrokerMetrics()
    metrics.register_state(
        partitions=lambda: [PartitionSnapshot("t", 0, True, True, False, 123)],
        is_controller=lambda: True,
    )
    metrics.bytes_in.labels("t").inc(10)
    text = generate_latest(metrics.registry).decode()
    assert 'headwater_broker_topic_bytes_in_total{topic="t"} 10.0' in text
    assert "headwater_replica_manager_under_replicated_partitions 1.0" in text
    assert "headwater_controller_active_controller_count 1.0" in text
    assert 'headwater_log_size_bytes{partition="0",topic="t"} 123.0' in text
    assert PartitionState("t", 0, LeaderAndIsr(0, 0, (0,), 0), (0,)).leader == 0
