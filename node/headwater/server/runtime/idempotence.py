"""The broker's side of the idempotent producer: headers in, producer-state decisions out.

:mod:`headwater.replication.producer_state` decides; this module feeds it from
the two places the bytes live.  On produce, :func:`check_produce` reads the one
61-byte header of the request's batch (records are never decoded) and returns
what the leader must do.  On becoming leader (and therefore at every broker
start), :func:`~headwater.server.runtime.txn_log.load_producer_state` restores the
producer state from the newest producer snapshot and replays the batch headers after
it (the whole log when there is no whole snapshot): the log is the replicated copy of
the producer state, so a new leader knows the batches its predecessor acknowledged.

Called only by the :class:`~headwater.server.runtime.replica_manager.ReplicaManager`,
the one owner of every ``Log``, on the broker's event loop; it lives in the runtime
for that reason.
"""

from __future__ import annotations

import logging

from headwater import errors
from headwater.errors import ErrorCode
from headwater.records import parse_header
from headwater.replication.producer_state import (
    APPEND,
    CheckResult,
    ProducerBatch,
    ProducerStateManager,
    Verdict,
)

log = logging.getLogger(__name__)


def check_produce(
    producers: ProducerStateManager, records: bytes
) -> tuple[CheckResult, ProducerBatch | None]:
    """The verdict for a produce request's ``records`` and the batch to record on success.

    An idempotent request must hold exactly one batch (as in Kafka), so that a
    retry is recognisable as a whole.  Malformed bytes are left to the log's
    own validation, which reports them precisely.
    """
    try:
        header = parse_header(records, 0)
    except errors.HeadwaterError:
        return APPEND, None
    if header.producer_id < 0:
        return APPEND, None
    if header.size_in_bytes != len(records):
        return (
            CheckResult(
                Verdict.REFUSE,
                ErrorCode.INVALID_RECORD,
                "an idempotent produce request must contain exactly one batch per partition",
            ),
            None,
        )
    batch = ProducerBatch(
        header.producer_id, header.producer_epoch, header.base_sequence, header.last_offset_delta
    )
    return producers.check(batch), batch
