"""The broker's side of the idempotent producer: headers in, producer-state decisions out.

:mod:`headwater.replication.producer_state` decides; this module feeds it from
the two places the bytes live.  On produce, :func:`check_produce` reads the one
61-byte header of the request's batch (records are never decoded) and returns
what the leader must do.  On becoming leader (and therefore at every broker
start), :func:`rebuild` scans the batch headers of the whole local log, oldest
segment first, and replays them: the log is the replicated copy of the producer
state, so a new leader knows exactly the batches its predecessor acknowledged.
Kafka shortens this scan with ``.snapshot`` files; Headwater scans headers from
the log start (see the producer-state module for why that is enough for now).

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
from headwater.storage import Log

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


def rebuild(producers: ProducerStateManager, plog: Log) -> int:
    """Replace ``producers`` with the state found in ``plog``'s batch headers; return batches.

    On a read error the state is left empty: every producer is then unknown and
    accepted at any sequence, which loses duplicate detection for in-flight
    retries but never refuses valid data.
    """
    producers.clear()
    seen = 0
    try:
        for segment in plog.segments:
            for _position, header in segment.iter_headers(0):
                if header.producer_id >= 0 and not header.is_control:
                    producers.update(
                        ProducerBatch(
                            header.producer_id,
                            header.producer_epoch,
                            header.base_sequence,
                            header.last_offset_delta,
                        ),
                        base_offset=header.base_offset,
                    )
                    seen += 1
    except (OSError, errors.HeadwaterError) as exc:
        log.warning("cannot rebuild producer state of %s: %s", plog, errors.describe(exc))
        producers.clear()
    return seen
