"""Zigzag varints: known encodings, the small-value table, and bad input
(truncated, longer than ten bytes, or a tenth byte that overflows 64 bits)."""

from __future__ import annotations

import pytest
from headwater.errors import CorruptRecordError
from headwater.records.varint import (
    SMALL_VARINT_LIMIT,
    SMALL_VARINTS,
    decode_varint,
    encode_varint,
    zigzag_decode,
    zigzag_encode,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.records import spec_batch

KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN)
def test_known_encodings(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex("ff" + encoded), 1) == (value, 1 + len(encoded) // 2)


def test_table_matches_the_spec_encoder() -> None:
    assert len(SMALL_VARINTS) == SMALL_VARINT_LIMIT
    assert all(SMALL_VARINTS[n] == spec_batch.zigzag_varint(n) for n in range(SMALL_VARINT_LIMIT))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert raw == spec_batch.zigzag_varint(value)
    assert decode_varint(raw, 0) == (value, len(raw))
    assert zigzag_decode(zigzag_encode(value)) == value


def test_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="varlong"):
        encode_varint(2**63)


def test_truncated_and_overlong_varints_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varint(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(CorruptRecordError, match="overflows 64 bits"):
        decode_varint(b"\xff" * 9 + b"\x02", 0)
