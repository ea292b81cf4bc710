"""The broker's periodic jobs, as :class:`~headwater.server.runtime.scheduler.PeriodicJob`s.

One list, so that everything the broker does on a timer is in one place (see
docs/architecture.md for the threads):

- ``log-tasks``, every ``log.retention.check.interval.ms``: retention, ``flush.ms``
  and checkpoints over every log on disk (off-loaded);
- ``isr-expiration``, every half ``replica.lag.time.max.ms`` (Kafka's): shrink the
  ISR of followers that fell behind;
- ``group-timers``, every :data:`GROUP_TICK_INTERVAL_MS`: the group coordinator's
  session and rebalance timers;
- ``group-lag``, every ``REFRESH_INTERVAL_S``: end offsets of partitions led
  elsewhere, for the lag metric;
- ``transaction-timeouts``, every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: the transaction
  coordinator aborts expired transactions and removes idle transactional ids;
- ``log-cleaner``, every ``log.cleaner.backoff.ms`` when ``log.cleaner.enable``:
  compaction (off-loaded).

Every log is reached through the :class:`ReplicaManager`'s operations.
"""

from __future__ import annotations

import logging

from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.server.config import BrokerConfig
from headwater.server.group_lag import REFRESH_INTERVAL_S, RemoteEndOffsets
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.runtime.scheduler import PeriodicJob
from headwater.storage.cleaner import LogCleaner
from headwater.transactions.coordinator_runtime import TransactionCoordinatorRuntime

log = logging.getLogger(__name__)

GROUP_TICK_INTERVAL_MS = 250
"""How often the group coordinator's timers (session expiry, rebalance delays) run."""

MIN_ISR_EXPIRATION_INTERVAL_MS = 50


def periodic_jobs(
    config: BrokerConfig,
    *,
    replicas: ReplicaManager,
    groups: GroupCoordinatorRuntime,
    group_end_offsets: RemoteEndOffsets,
    transactions: TransactionCoordinatorRuntime | None = None,
) -> list[PeriodicJob]:
    """Retention/flush/checkpoints, ISR expiry, the group timers and lag, the cleaner."""

    async def log_tasks(now_ms: int) -> None:
        await replicas.run_log_tasks(now_ms)

    async def isr_expiration(_now_ms: int) -> None:
        replicas.maybe_shrink_isrs()

    async def group_timers(_now_ms: int) -> None:
        await groups.tick()

    async def group_lag(_now_ms: int) -> None:
        await group_end_offsets.refresh()

    jobs = [
        PeriodicJob("log-tasks", config.log_retention_check_interval_ms, log_tasks),
        PeriodicJob(
            "isr-expiration",
            max(config.replica_lag_time_max_ms / 2, MIN_ISR_EXPIRATION_INTERVAL_MS),
            isr_expiration,
        ),
        PeriodicJob("group-timers", GROUP_TICK_INTERVAL_MS, group_timers),
        PeriodicJob("group-lag", REFRESH_INTERVAL_S * 1000, group_lag),
    ]
    if transactions is not None:

        async def transaction_timeouts(_now_ms: int) -> None:
            await transactions.tick()

        jobs.append(
            PeriodicJob(
                "transaction-timeouts",
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                transaction_timeouts,
            )
        )
    if config.log_cleaner_enable:
        cleaner = LogCleaner()

        async def clean(now_ms: int) -> None:
            stats = await replicas.clean_logs(cleaner, now_ms=now_ms)
            if stats.segments_rewritten:
                log.info("log cleaner: %s", stats)

        jobs.append(PeriodicJob("log-cleaner", config.log_cleaner_backoff_ms, clean))
    return jobs
