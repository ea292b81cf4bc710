"""CPU per request of the Kafka door's codec for the records-carrying APIs.

    .venv/bin/python bench/door_codec.py [--records-bytes 1000000] [--iterations 300]

Times, in this process with ``time.process_time``, what the Kafka listener does to a
request around the broker's own work: decoding a Produce v9 request that carries one
RecordBatch blob of ``--records-bytes`` (``protocol.parse_request``), encoding its Produce
response, and building and encoding a Fetch response (v11 and v12) carrying a blob of
that size into the chunks the listener sends (``protocol.encode_response_chunks``: the
records are one chunk, not copied).  The records stay one ``bytes`` value throughout
(never decoded per record).
Prints microseconds per request and per MB.
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "node"))

from headwater.kafka import protocol
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

ZERO = datetime.timedelta(0)


def per_call_us(call: Callable[[], Any], iterations: int) -> float:
    call()
    start = time.process_time()
    for _ in range(iterations):
        call()
    return (time.process_time() - start) / iterations * 1e6


def produce_frame(records: bytes) -> bytes:
    body = protocol.build(
        ProduceRequest,
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            protocol.build(
                TopicProduceData,
                name="t",
                partition_data=(protocol.build(PartitionProduceData, index=0, records=records),),
            ),
        ),
    )
    out = io.BytesIO()
    header = RequestHeader(
        request_api_key=i16(0), request_api_version=i16(9), correlation_id=i32(1), client_id="c"
    )
    entity_writer(RequestHeader)(out, header)
    entity_writer(ProduceRequest)(out, body)
    return out.getvalue()


def produce_response() -> bytes:
    m = protocol.response_module(0, 9)
    part = protocol.build(
        m.PartitionProduceResponse,
        index=0,
        error_code=protocol.error_code(0),
        base_offset=5,
        log_append_time=None,
        log_start_offset=0,
        record_errors=(),
        error_message=None,
    )
    topic = protocol.build(m.TopicProduceResponse, name="t", partition_responses=(part,))
    body = protocol.build(m.ProduceResponse, responses=(topic,), throttle_time=ZERO)
    return protocol.encode_response(1, body)


def fetch_response(version: int, records: bytes) -> list[bytes | bytearray | memoryview]:
    m = protocol.response_module(1, version)
    part = protocol.build(
        m.PartitionData,
        partition_index=0,
        error_code=protocol.error_code(0),
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=0,
        aborted_transactions=(),
        preferred_read_replica=-1,
        records=records,
    )
    topic = protocol.build(m.FetchableTopicResponse, topic="t", partitions=(part,))
    body = protocol.build(
        m.FetchResponse,
        throttle_time=ZERO,
        error_code=protocol.error_code(0),
        session_id=1,
        responses=(topic,),
    )
    return protocol.encode_response_chunks(1, body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records-bytes", type=int, default=1_000_000)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    records = b"x" * args.records_bytes
    frame = produce_frame(records)
    mb = args.records_bytes / 1e6
    rows = [
        ("Produce v9 request parse", lambda: protocol.parse_request(frame)),
        ("Produce v9 response encode", produce_response),
        ("Fetch v11 response encode", lambda: fetch_response(11, records)),
        ("Fetch v12 response encode", lambda: fetch_response(12, records)),
        ("one copy of the records", lambda: bytearray(records)),
    ]
    print(f"records blob of {args.records_bytes} B, {args.iterations} iterations")
    for name, call in rows:
        us = per_call_us(call, args.iterations)
        print(f"{name:28s} {us:8.1f} us/request {us / 1000 / mb:6.3f} ms/MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
