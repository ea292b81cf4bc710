"""The broker's periodic jobs: which run, how often, and that each reaches the logs and
the ISR only through the ReplicaManager's operations."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.server.config import BrokerConfig
from headwater.server.group_lag import REFRESH_INTERVAL_S
from headwater.server.runtime.jobs import GROUP_TICK_INTERVAL_MS, periodic_jobs
from headwater.storage.cleaner import CleanerStats, LogCleaner


class Recorder:
    """Stands in for the ReplicaManager, the group runtime and the remote end offsets."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def run_log_tasks(self, now_ms: int) -> None:
        self.calls.append(f"log-tasks@{now_ms}")

    def maybe_shrink_isrs(self) -> None:
        self.calls.append("shrink")

    async def clean_logs(self, cleaner: LogCleaner, *, now_ms: int) -> CleanerStats:
        self.calls.append(f"clean@{now_ms}")
        return CleanerStats()

    async def tick(self) -> None:
        self.calls.append("tick")

    async def refresh(self) -> None:
        self.calls.append("refresh")


def jobs(config: BrokerConfig) -> tuple[dict[str, Any], Recorder]:
    fake: Any = Recorder()
    made = periodic_jobs(config, replicas=fake, groups=fake, group_end_offsets=fake)
    return {job.name: job for job in made}, fake


def test_the_jobs_and_their_intervals() -> None:
    config = BrokerConfig(
        broker_id=0,
        log_retention_check_interval_ms=300_000,
        replica_lag_time_max_ms=30_000,
        log_cleaner_backoff_ms=15_000,
    )
    by_name, _ = jobs(config)
    assert {name: job.interval_ms for name, job in by_name.items()} == {
        "log-tasks": 300_000,
        "isr-expiration": 15_000,
        "group-timers": GROUP_TICK_INTERVAL_MS,
        "group-lag": REFRESH_INTERVAL_S * 1000,
        "log-cleaner": 15_000,
    }


def test_no_cleaner_job_when_the_cleaner_is_off() -> None:
    by_name, _ = jobs(BrokerConfig(broker_id=0, log_cleaner_enable=False))
    assert "log-cleaner" not in by_name


def test_each_job_calls_its_operation() -> None:
    by_name, fake = jobs(BrokerConfig(broker_id=0))

    async def run_all() -> None:
        for name in ("log-tasks", "isr-expiration", "group-timers", "group-lag", "log-cleaner"):
            await by_name[name].run(7)

    asyncio.run(run_all())
    assert fake.calls == ["log-tasks@7", "shrink", "tick", "refresh", "clean@7"]
