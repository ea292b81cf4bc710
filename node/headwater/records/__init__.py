"""Kafka RecordBatch v2, byte for byte: headers, records, compression, CRC-32C.

Pure bytes in, bytes out (docs/design.md, "Record format").  :mod:`.header` is the
broker's hot path and never decodes records; :mod:`.batch` builds and reads
whole batches for clients; :mod:`.compression` holds Kafka's codec framings
and :mod:`.record_codec` the per-record varint format, each behind a Protocol
so a native implementation can be swapped in; :mod:`.native` is the C one,
used by default when built (:func:`record_codec` says which is active).
"""

from headwater.records.batch import (
    Batch,
    build_batch,
    finish_batch,
    new_records_builder,
    read_batches,
    record_codec,
    set_record_codec,
)
from headwater.records.compression import CompressionCodec, register_codec
from headwater.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    Compression,
    TimestampType,
    parse_header,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
    verify_crc,
)
from headwater.records.native import NativeRecordCodec, native_available
from headwater.records.record import ConsumedRecord, Header, Record
from headwater.records.record_codec import (
    EncodedRecords,
    PythonRecordCodec,
    PythonRecordsBuilder,
    RecordCodec,
    RecordsBuilder,
)

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "Batch",
    "BatchHeader",
    "Compression",
    "CompressionCodec",
    "ConsumedRecord",
    "EncodedRecords",
    "Header",
    "NativeRecordCodec",
    "PythonRecordCodec",
    "PythonRecordsBuilder",
    "Record",
    "RecordCodec",
    "RecordsBuilder",
    "TimestampType",
    "build_batch",
    "finish_batch",
    "native_available",
    "new_records_builder",
    "parse_header",
    "read_batches",
    "record_codec",
    "register_codec",
    "scan_batches",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "set_record_codec",
    "validate_batches",
    "verify_crc",
]
