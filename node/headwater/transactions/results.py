"""What the transaction coordinator decides, as values (docs/style.md, "Small typed values").

A decision in :mod:`headwater.transactions.decisions` returns one of:

* :class:`Refuse` -- answer the request with a Kafka error; nothing changes;
* :class:`Reply` -- answer with a producer id and epoch now; nothing is written (a
  retry, or partitions already in the transaction);
* :class:`Transition` -- hold ``before`` (which has ``pending_state`` set) while the
  ``__transaction_state`` record of ``after`` is appended; once it is acknowledged the
  id's state is ``after`` (:func:`headwater.transactions.decisions.complete`), the
  client gets ``reply`` and, if ``markers`` is set, the coordinator writes that marker
  to every partition of ``after``; if the append fails, the id goes back to ``before``
  without its pending state (:func:`headwater.transactions.decisions.abandon`) and the
  client gets the append's error.
"""

from __future__ import annotations

import dataclasses

from headwater.errors import ErrorCode
from headwater.transactions.metadata import TransactionMetadata
from headwater.transactions.state import TransactionResult


@dataclasses.dataclass(frozen=True)
class Refuse:
    """Answer with ``error``; the transaction is unchanged."""

    error: ErrorCode
    message: str = ""


@dataclasses.dataclass(frozen=True)
class Reply:
    """Answer with no error and this producer id and epoch; nothing to write."""

    producer_id: int
    producer_epoch: int


@dataclasses.dataclass(frozen=True)
class Transition:
    """Append ``after`` to ``__transaction_state``, then answer ``reply`` (see module)."""

    before: TransactionMetadata
    after: TransactionMetadata
    reply: Reply | Refuse | None = None
    """The answer once the record is written (None: coordinator-initiated, nobody waits)."""
    markers: TransactionResult | None = None
    """Write this control record to every partition of ``after`` once the record is written."""


Decision = Refuse | Reply | Transition
