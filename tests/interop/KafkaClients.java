// Apache Kafka's Java clients against Headwater's Kafka listener (test_kafka_listener.py).
//
// Usage: java -cp <kafka-clients and its jars> KafkaClients.java BOOTSTRAP TOPIC GROUP
//
// Produces six records (keys, one null key, headers, create timestamps) to partitions 0
// and 1 of TOPIC with acks=all (idempotent, the 3.x default), then a consumer in GROUP
// subscribes, reads them, commits synchronously and reads its committed offsets back.
// Prints one line per fact, parsed by the test:
//   produced <partition> <offset>
//   consumed <partition> <offset> <key|-> <value> <timestamp> <header=value;...>
//   committed <partition> <offset>
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaClients {
    static final long BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                byte[] key = i == 3 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(
                        topic, i % 2, BASE_TS + i, key, ("value-" + i).getBytes(StandardCharsets.UTF_8));
                r.headers().add("n", ("h" + i).getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            for (java.util.concurrent.Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get();
                System.out.println("produced " + m.partition() + " " + m.offset());
            }
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < 6 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    StringBuilder headers = new StringBuilder();
                    for (Header h : r.headers()) {
                        headers.append(h.key()).append('=')
                                .append(new String(h.value(), StandardCharsets.UTF_8)).append(';');
                    }
                    String key = r.key() == null ? "-" : new String(r.key(), StandardCharsets.UTF_8);
                    System.out.println("consumed " + r.partition() + " " + r.offset() + " " + key + " "
                            + new String(r.value(), StandardCharsets.UTF_8) + " " + r.timestamp() + " "
                            + headers);
                    seen++;
                }
            }
            consumer.commitSync();
            Set<TopicPartition> tps = new HashSet<>(List.of(
                    new TopicPartition(topic, 0), new TopicPartition(topic, 1)));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(tps).entrySet()) {
                System.out.println("committed " + e.getKey().partition() + " "
                        + (e.getValue() == null ? -1 : e.getValue().offset()));
            }
        }
    }
}
