// Apache Kafka's own RecordBatch code, driven from tests/interop/test_kafka_interop.py.
//
// Run with the jars from scripts/fetch-kafka-clients.sh on the class path, as a
// single-file source program (java -cp 'JARS/*' KafkaBatches.java ...):
//
//   write DIR CASE...   for each CASE (none, gzip, snappy, lz4, zstd, or
//                       logappend = lz4 with LogAppendTime) write DIR/CASE.bin:
//                       one batch of the fixed records below, built by
//                       MemoryRecords.builder exactly as a Kafka producer does,
//                       then read it back as `read` does (checks the fixture).
//   read FILE...        parse each file with MemoryRecords.readableRecords,
//                       check every batch with ensureValid() (size and CRC-32C)
//                       and print one JSON line per batch with its header
//                       fields and its records (keys/values base64, or null).
//
// The fixed records must stay identical to EXPECTED_RECORDS in the Python test.
// Doing every case in one invocation keeps the test to two JVM start-ups.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

public class KafkaBatches {
    static final long BASE_OFFSET = 42L;
    static final long PRODUCER_ID = 7001L;
    static final short PRODUCER_EPOCH = 3;
    static final int BASE_SEQUENCE = 17;
    static final int PARTITION_LEADER_EPOCH = 5;
    static final long LOG_APPEND_TIME = 1_700_000_009_999L;

    record Rec(long timestamp, byte[] key, byte[] value, Header[] headers) {}

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** 150 000 compressible bytes: crosses lz4's 64 KiB and snappy's 32 KiB block sizes. */
    static byte[] bigValue() {
        byte[] b = new byte[150_000];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) ((i * 7 + (i >> 10)) % 251);
        }
        return b;
    }

    static List<Rec> fixedRecords() {
        List<Rec> out = new ArrayList<>();
        out.add(new Rec(1_700_000_000_000L, utf8("key-0"), utf8("value-0"), new Header[0]));
        out.add(new Rec(1_700_000_000_005L, null, utf8("value with a null key"),
                new Header[] {new RecordHeader("trace-id", utf8("abc123"))}));
        out.add(new Rec(1_699_999_999_990L, utf8("tombstone"), null, new Header[0]));
        out.add(new Rec(1_700_000_000_010L, new byte[0], new byte[0], new Header[] {
            new RecordHeader("h1", utf8("v1")),
            new RecordHeader("h-null", (byte[]) null),
            new RecordHeader("h-empty", new byte[0]),
            new RecordHeader("h1", utf8("repeated key")),
            new RecordHeader("grüße-ключ", utf8("ünïcode")),
        }));
        out.add(new Rec(1_700_000_000_020L, utf8("big"), bigValue(), new Header[0]));
        return out;
    }

    static void write(Path dir, String kase) throws Exception {
        boolean logAppend = kase.equals("logappend");
        String codec = logAppend ? "lz4" : kase;
        Compression compression = Compression.of(CompressionType.forName(codec)).build();
        TimestampType tsType = logAppend ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
        long logAppendTime = logAppend ? LOG_APPEND_TIME : RecordBatch.NO_TIMESTAMP;
        ByteBuffer buffer = ByteBuffer.allocate(1 << 20);
        MemoryRecordsBuilder builder = MemoryRecords.builder(
                buffer, RecordBatch.MAGIC_VALUE_V2, compression, tsType, BASE_OFFSET,
                logAppendTime, PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE,
                false, PARTITION_LEADER_EPOCH);
        for (Rec r : fixedRecords()) {
            builder.append(r.timestamp(), r.key(), r.value(), r.headers());
        }
        MemoryRecords records = builder.build();
        ByteBuffer out = records.buffer();
        byte[] bytes = new byte[out.remaining()];
        out.get(bytes);
        Files.write(dir.resolve(kase + ".bin"), bytes);
    }

    static String b64(ByteBuffer buf) {
        if (buf == null) {
            return "null";
        }
        byte[] b = new byte[buf.remaining()];
        buf.duplicate().get(b);
        return "\"" + Base64.getEncoder().encodeToString(b) + "\"";
    }

    static String b64(byte[] b) {
        return b == null ? "null" : "\"" + Base64.getEncoder().encodeToString(b) + "\"";
    }

    /** A JSON string literal; everything outside printable ASCII is \\u-escaped. */
    static String str(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    static void read(Path file) throws Exception {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(file)));
        int batches = 0;
        for (MutableRecordBatch batch : records.batches()) {
            batch.ensureValid();
            batches++;
            StringBuilder sb = new StringBuilder("{");
            sb.append("\"file\":").append(str(file.getFileName().toString()));
            sb.append(",\"base_offset\":").append(batch.baseOffset());
            sb.append(",\"last_offset\":").append(batch.lastOffset());
            sb.append(",\"partition_leader_epoch\":").append(batch.partitionLeaderEpoch());
            sb.append(",\"magic\":").append(batch.magic());
            sb.append(",\"crc\":").append(batch.checksum());
            sb.append(",\"compression\":").append(str(batch.compressionType().name));
            sb.append(",\"timestamp_type\":").append(str(batch.timestampType().name));
            sb.append(",\"max_timestamp\":").append(batch.maxTimestamp());
            sb.append(",\"producer_id\":").append(batch.producerId());
            sb.append(",\"producer_epoch\":").append(batch.producerEpoch());
            sb.append(",\"base_sequence\":").append(batch.baseSequence());
            sb.append(",\"is_transactional\":").append(batch.isTransactional());
            sb.append(",\"is_control\":").append(batch.isControlBatch());
            sb.append(",\"size_in_bytes\":").append(batch.sizeInBytes());
            sb.append(",\"records\":[");
            boolean first = true;
            for (Record r : batch) {
                r.ensureValid();
                if (!first) {
                    sb.append(',');
                }
                first = false;
                sb.append("{\"offset\":").append(r.offset());
                sb.append(",\"timestamp\":").append(r.timestamp());
                sb.append(",\"key\":").append(r.hasKey() ? b64(r.key()) : "null");
                sb.append(",\"value\":").append(r.hasValue() ? b64(r.value()) : "null");
                sb.append(",\"headers\":[");
                Header[] headers = r.headers();
                for (int i = 0; i < headers.length; i++) {
                    if (i > 0) {
                        sb.append(',');
                    }
                    sb.append('[').append(str(headers[i].key())).append(',')
                            .append(b64(headers[i].value())).append(']');
                }
                sb.append("]}");
            }
            sb.append("]}");
            System.out.println(sb);
        }
        if (batches == 0) {
            throw new IllegalStateException(file + ": no complete batch");
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 3 && args[0].equals("write")) {
            Path dir = Path.of(args[1]);
            for (int i = 2; i < args.length; i++) {
                write(dir, args[i]);
                read(dir.resolve(args[i] + ".bin"));
            }
        } else if (args.length >= 2 && args[0].equals("read")) {
            for (int i = 1; i < args.length; i++) {
                read(Path.of(args[i]));
            }
        } else {
            System.err.println("usage: KafkaBatches write DIR CASE... | read FILE...");
            System.exit(2);
        }
    }
}
