"""An in-memory, single-broker stand-in for Headwater's Broker and Admin services.

It lets the client's unit tests run the real Producer, Consumer and Admin
over real gRPC on 127.0.0.1 without ZooKeeper or broker processes: one broker
that leads every partition, keeps each partition's batches in a list, holds
fetches as long polls, and deduplicates idempotent retries the way the real
broker must (last 5 batches per producer).  Fault injection: ``drop_acks``
makes the next N produce answers fail after appending (a lost
acknowledgement), ``fail_produce`` answers the next N partitions with an error
code without appending.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Any

import grpc
from headwater import records
from headwater.v1 import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc, common_pb2


class _Partition:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.timestamps: list[tuple[int, int]] = []  # (max_timestamp, base_offset)
        self.next_offset = 0
        self.producers: dict[int, list[tuple[int, int, int]]] = {}  # pid -> (seq0, seqN, base)


class _ClientIdRecorder(grpc.ServerInterceptor):
    def __init__(self, broker: FakeBroker) -> None:
        self._broker = broker

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        metadata = dict(handler_call_details.invocation_metadata or ())
        method = handler_call_details.method.rsplit("/", 1)[-1]
        self._broker.client_ids.append((method, metadata.get("client-id")))
        return continuation(handler_call_details)


class FakeBroker(broker_pb2_grpc.BrokerServicer, admin_pb2_grpc.AdminServicer):
    def __init__(self) -> None:
        self.topics: dict[str, list[_Partition]] = {}
        self.cond = threading.Condition()
        self.drop_acks = 0
        self.fail_produce: list[int] = []
        self.produce_requests: list[Any] = []
        self.fetch_requests = 0
        self.next_pid = 1000
        self.client_ids: list[tuple[str, str | None]] = []
        """(method, its ``client-id`` metadata or None) per call, as received."""
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8), interceptors=[_ClientIdRecorder(self)]
        )
        broker_pb2_grpc.add_BrokerServicer_to_server(self, self.server)
        admin_pb2_grpc.add_AdminServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        with self.cond:
            self.cond.notify_all()
        self.server.stop(0).wait()

    def create(self, name: str, partitions: int) -> None:
        with self.cond:
            self.topics[name] = [_Partition() for _ in range(partitions)]

    def offsets(self, topic: str, partition: int) -> list[int]:
        """Every stored record's offset (to check for duplicates)."""
        out = []
        for raw in self.topics[topic][partition].batches:
            for b in records.read_batches(raw):
                out.extend(r.offset for r in b.records())
        return out

    def values(self, topic: str, partition: int) -> list[bytes | None]:
        out = []
        for raw in self.topics[topic][partition].batches:
            for b in records.read_batches(raw):
                out.extend(r.value for r in b.records())
        return out

    # -- Broker ---------------------------------------------------------------------

    def Metadata(self, request: Any, context: Any) -> Any:
        names = list(self.topics) if request.all_topics or not request.topics else request.topics
        topics = []
        for name in names:
            parts = self.topics.get(name)
            if parts is None:
                topics.append(broker_pb2.TopicMetadata(name=name, error=3))
                continue
            topics.append(
                broker_pb2.TopicMetadata(
                    name=name,
                    partitions=[
                        broker_pb2.PartitionMetadata(
                            partition=i, leader=1, leader_epoch=0, replicas=[1], isr=[1]
                        )
                        for i in range(len(parts))
                    ],
                )
            )
        return broker_pb2.MetadataResponse(
            brokers=[common_pb2.BrokerInfo(id=1, host="127.0.0.1", port=self.port)],
            controller_id=1,
            cluster_id="fake",
            topics=topics,
        )

    def InitProducerId(self, request: Any, context: Any) -> Any:
        with self.cond:
            self.next_pid += 1
            return broker_pb2.InitProducerIdResponse(producer_id=self.next_pid, producer_epoch=0)

    def Produce(self, request: Any, context: Any) -> Any:
        out = []
        with self.cond:
            self.produce_requests.append(request)
            for p in request.partitions:
                if self.fail_produce:
                    out.append(
                        broker_pb2.ProducePartitionResponse(
                            topic=p.topic, partition=p.partition, error=self.fail_produce.pop(0)
                        )
                    )
                    continue
                out.append(self._append(p))
            self.cond.notify_all()
            drop = self.drop_acks > 0
            if drop:
                self.drop_acks -= 1
        if drop:
            context.abort(grpc.StatusCode.UNAVAILABLE, "injected: acknowledgement lost")
        return broker_pb2.ProduceResponse(partitions=out)

    def _append(self, p: Any) -> Any:
        parts = self.topics.get(p.topic)
        if parts is None or p.partition >= len(parts):
            return broker_pb2.ProducePartitionResponse(
                topic=p.topic, partition=p.partition, error=3
            )
        part = parts[p.partition]
        data = bytearray(p.records)
        base = part.next_offset
        for b in records.read_batches(bytes(data)):
            pid, seq, n = b.producer_id, b.base_sequence, b.records_count
            if pid >= 0:
                history = part.producers.setdefault(pid, [])
                for s0, sn, off in history:
                    if (s0, sn) == (seq, seq + n - 1):  # a retry of an appended batch
                        return broker_pb2.ProducePartitionResponse(
                            topic=p.topic, partition=p.partition, base_offset=off
                        )
                expected = history[-1][1] + 1 if history else 0
                if seq != expected:
                    return broker_pb2.ProducePartitionResponse(
                        topic=p.topic, partition=p.partition, error=45
                    )
                history.append((seq, seq + n - 1, part.next_offset))
                del history[:-5]
            raw = bytearray(b.raw())
            records.set_base_offset(raw, 0, part.next_offset)
            part.batches.append(bytes(raw))
            part.timestamps.append((b.max_timestamp, part.next_offset))
            part.next_offset += n
        return broker_pb2.ProducePartitionResponse(
            topic=p.topic, partition=p.partition, base_offset=base, log_append_time_ms=-1
        )

    def Fetch(self, request: Any, context: Any) -> Any:
        deadline = time.monotonic() + request.max_wait_ms / 1000.0
        with self.cond:
            self.fetch_requests += 1
            while True:
                resp, size = self._fetch(request)
                remaining = deadline - time.monotonic()
                if size >= max(1, request.min_bytes) or remaining <= 0 or not context.is_active():
                    return resp
                self.cond.wait(remaining)

    def _fetch(self, request: Any) -> tuple[Any, int]:
        out, total = [], 0
        for fp in request.partitions:
            parts = self.topics.get(fp.topic)
            if parts is None or fp.partition >= len(parts):
                out.append(
                    broker_pb2.FetchedPartition(topic=fp.topic, partition=fp.partition, error=3)
                )
                continue
            part = parts[fp.partition]
            if not 0 <= fp.fetch_offset <= part.next_offset:
                out.append(
                    broker_pb2.FetchedPartition(
                        topic=fp.topic,
                        partition=fp.partition,
                        error=1,
                        high_watermark=part.next_offset,
                    )
                )
                continue
            chunks, size = [], 0
            for raw in part.batches:
                h = records.parse_header(raw, 0)
                if h.base_offset + h.last_offset_delta < fp.fetch_offset:
                    continue
                if chunks and size + len(raw) > fp.partition_max_bytes:
                    break
                chunks.append(raw)
                size += len(raw)
            total += size
            out.append(
                broker_pb2.FetchedPartition(
                    topic=fp.topic,
                    partition=fp.partition,
                    high_watermark=part.next_offset,
                    log_start_offset=0,
                    records=b"".join(chunks),
                )
            )
        return broker_pb2.FetchResponse(partitions=out), total

    def ListOffsets(self, request: Any, context: Any) -> Any:
        out = []
        with self.cond:
            for q in request.partitions:
                part = self.topics[q.topic][q.partition]
                if q.timestamp == -2:
                    offset = 0
                elif q.timestamp == -1:
                    offset = part.next_offset
                else:
                    offset = next((o for ts, o in part.timestamps if ts >= q.timestamp), -1)
                out.append(
                    broker_pb2.ListOffsetsPartitionResponse(
                        topic=q.topic, partition=q.partition, offset=offset, timestamp=-1
                    )
                )
        return broker_pb2.ListOffsetsResponse(partitions=out)

    # -- Admin ----------------------------------------------------------------------

    def CreateTopics(self, request: Any, context: Any) -> Any:
        out = []
        for t in request.topics:
            if t.name in self.topics:
                out.append(
                    admin_pb2.CreatableTopicResult(name=t.name, error=36, error_message="exists")
                )
                continue
            self.create(t.name, t.num_partitions if t.num_partitions > 0 else 1)
            out.append(admin_pb2.CreatableTopicResult(name=t.name))
        return admin_pb2.CreateTopicsResponse(topics=out)

    def DescribeCluster(self, request: Any, context: Any) -> Any:
        return admin_pb2.DescribeClusterResponse(
            cluster_id="fake",
            controller_id=1,
            brokers=[common_pb2.BrokerInfo(id=1, host="127.0.0.1", port=self.port)],
        )
