"""The producer's C code (the extension ``_native``) behind its Python reference.

``_native.SendPath`` is ``Producer.send``'s common case and ``_native.run_thunks``
a batch's callback loop; the Python code in :mod:`.accumulator` and
:mod:`.futures` does the same and is used where the extension is missing (no
compiler, an unusual interpreter, or the record codec's ``_speedups`` not built,
whose ``RecordsBuilder`` the send path appends to) or
``HEADWATER_PURE_PYTHON_RECORDS=1`` turns the C code off, as it does the record
codec's (:mod:`headwater.records.native`).
"""

from __future__ import annotations

from typing import Any

from headwater.records.native import pure_python_forced

try:
    from headwater.client.producer import _native
except ImportError as exc:  # not built: the Python code is the fallback
    _native = None  # type: ignore[assignment]  # a module or None
    UNAVAILABLE_REASON: str | None = f"{type(exc).__name__}: {exc}"
else:
    UNAVAILABLE_REASON = None

__all__ = ["UNAVAILABLE_REASON", "native_run_thunks", "native_send_path_type"]


def native_run_thunks() -> Any | None:
    """The C loop that runs a produce batch's callbacks (``_native.run_thunks``, see
    :mod:`headwater.client.producer.futures`), or None where the extension is not built or
    ``HEADWATER_PURE_PYTHON_RECORDS`` turns it off (the Python loop is used)."""
    if _native is None or pure_python_forced():
        return None
    return _native.run_thunks


def native_send_path_type() -> Any | None:
    """``_native.SendPath`` (``Producer.send``'s common case in C, see
    :meth:`headwater.client.producer.accumulator.RecordAccumulator.native_send_path`), or None
    where the extension is not built or ``HEADWATER_PURE_PYTHON_RECORDS`` turns it off."""
    if _native is None or pure_python_forced():
        return None
    return _native.SendPath
