"""Partition logs on disk, in Kafka's layout: segments, indexes, checkpoints, recovery.

Public surface (everything else is internal):

- :class:`LogConfig` and :data:`TOPIC_CONFIG_KEYS`: topic-level settings with Kafka's names.
- :class:`Log`: one partition (``append_as_leader``, ``append_as_follower``, ``read``,
  ``fetch_offset_by_timestamp``, truncation, retention) and its result values.
- :class:`LogManager`: every log of a broker across ``log.dirs``, with checkpoints,
  clean-shutdown marker and the retention/flush scheduler.

Only :mod:`headwater.records` and :mod:`headwater.errors` are imported: storage
knows nothing of the network (docs/design.md, "Layers").
"""

from headwater.storage.config import DEFAULT_LOG_CONFIG, TOPIC_CONFIG_KEYS, LogConfig
from headwater.storage.epoch_cache import EpochEntry, LeaderEpochCache
from headwater.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchDataInfo,
    Log,
    LogAppendInfo,
    TimestampAndOffset,
)
from headwater.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager
from headwater.storage.recovery import LoadInfo
from headwater.storage.segment import LogSegment

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "DEFAULT_LOG_CONFIG",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "TOPIC_CONFIG_KEYS",
    "EpochEntry",
    "FetchDataInfo",
    "LeaderEpochCache",
    "LoadInfo",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "TimestampAndOffset",
]
