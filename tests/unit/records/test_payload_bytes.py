"""``payload_bytes``: the key and value bytes of a list of records, None counting 0,
the same in C and in Python; the C function refuses what is not a list of tuples
holding bytes or None at the given fields, and an index past a record's end."""

from __future__ import annotations

import pytest
from headwater.client.types import ConsumerRecord
from headwater.records import native
from headwater.records.native import PURE_PYTHON_ENV, native_available, payload_bytes

KEY = ConsumerRecord._fields.index("key")
VALUE = ConsumerRecord._fields.index("value")

RECORDS = [
    ConsumerRecord("t", 0, 0, 1, b"key", b"v" * 100),
    ConsumerRecord("t", 0, 1, 1, None, b"w" * 7),
    ConsumerRecord("t", 0, 2, 1, b"", None),
    ConsumerRecord("t", 0, 3, 1, None, None, (("h", b"not counted"),)),
]
EXPECTED = 3 + 100 + 7


@pytest.fixture(params=["python", "native"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    elif not native_available():
        pytest.skip(f"native record codec not built: {native.UNAVAILABLE_REASON}")
    else:
        monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)
    return str(request.param)


def test_counts_keys_and_values_none_as_zero(mode: str) -> None:
    assert payload_bytes(RECORDS, KEY, VALUE) == EXPECTED


def test_an_empty_list_is_zero(mode: str) -> None:
    assert payload_bytes([], KEY, VALUE) == 0


def test_equals_the_python_sum_over_many_records(mode: str) -> None:
    records = [ConsumerRecord("t", 0, i, 1, b"k" * (i % 3), b"v" * (i % 1000)) for i in range(5000)]
    assert payload_bytes(records, KEY, VALUE) == sum(
        len(r.key or b"") + len(r.value or b"") for r in records
    )


def _native() -> object:
    if not native_available():
        pytest.skip(f"native record codec not built: {native.UNAVAILABLE_REASON}")
    return native._speedups


@pytest.mark.parametrize(
    ("records", "key", "value", "error", "match"),
    [
        ((RECORDS[0],), KEY, VALUE, TypeError, "records: list"),
        ([("t", 0)], KEY, VALUE, IndexError, "has no field"),
        ([["not", "a", "tuple"]], 0, 1, TypeError, "is not a tuple"),
        ([("t", 0, 0, 1, "str key", b"v")], KEY, VALUE, TypeError, "is not bytes or None"),
        (RECORDS, -1, VALUE, ValueError, ">= 0"),
    ],
)
def test_native_refuses_bad_input(
    records: object, key: int, value: int, error: type[Exception], match: str
) -> None:
    speedups = _native()
    with pytest.raises(error, match=match):
        speedups.payload_bytes(records, key, value)  # type: ignore[attr-defined]
