// Apache Kafka's Java consumer with group.protocol=consumer (KIP-848) against Headwater's
// Kafka listener (test_kafka_listener.py).
//
// Usage: java -cp <kafka-clients and its jars> KafkaConsumerProtocol.java BOOTSTRAP TOPIC GROUP
//
// TOPIC has two partitions of ten records each.  Member A joins and is assigned both;
// member B joins and the group moves one partition to it; B reads its partition, commits
// offset 5 there and leaves; A is assigned both again and resumes B's partition at the
// committed offset.  Prints one line per fact, parsed by the test:
//   assigned <a|b> <partition,...>
//   committed <partition> <offset>
//   resumed <partition> <offset>     (A's first record of B's partition after B left)
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class KafkaConsumerProtocol {
    static final long DEADLINE_MS = 90_000;

    static KafkaConsumer<byte[], byte[]> member(String bootstrap, String group) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("group.protocol", "consumer");
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    static Set<Integer> partitions(KafkaConsumer<byte[], byte[]> c) {
        return c.assignment().stream().map(TopicPartition::partition)
                .collect(Collectors.toCollection(TreeSet::new));
    }

    static String show(Set<Integer> ps) {
        return ps.stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    static void fail(String what) {
        System.out.println("timeout " + what);
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        KafkaConsumer<byte[], byte[]> a = member(bootstrap, group);
        a.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (partitions(a).size() < 2) {
            if (System.currentTimeMillis() > deadline) fail("a alone");
            a.poll(Duration.ofMillis(200));
        }
        System.out.println("assigned a " + show(partitions(a)));

        KafkaConsumer<byte[], byte[]> b = member(bootstrap, group);
        b.subscribe(List.of(topic));
        deadline = System.currentTimeMillis() + DEADLINE_MS;
        int seen = 0; // B's records: it only ever has the partition it is moved
        while (partitions(a).size() != 1 || partitions(b).size() != 1) {
            if (System.currentTimeMillis() > deadline) fail("a and b");
            a.poll(Duration.ofMillis(100));
            seen += b.poll(Duration.ofMillis(100)).count();
        }
        int moved = partitions(b).iterator().next();
        System.out.println("assigned a " + show(partitions(a)));
        System.out.println("assigned b " + show(partitions(b)));

        TopicPartition tp = new TopicPartition(topic, moved);
        deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (seen < 10) {
            if (System.currentTimeMillis() > deadline) fail("b reading");
            seen += b.poll(Duration.ofMillis(200)).records(tp).size();
            a.poll(Duration.ofMillis(50));
        }
        b.commitSync(Map.of(tp, new OffsetAndMetadata(5)));
        System.out.println("committed " + moved + " "
                + b.committed(Set.of(tp)).get(tp).offset());
        b.close();

        deadline = System.currentTimeMillis() + DEADLINE_MS;
        Long resumed = null;
        while (resumed == null) {
            if (System.currentTimeMillis() > deadline) fail("a taking over");
            for (ConsumerRecord<byte[], byte[]> r : a.poll(Duration.ofMillis(200)).records(tp)) {
                if (resumed == null) resumed = r.offset();
            }
        }
        System.out.println("assigned a " + show(partitions(a)));
        System.out.println("resumed " + moved + " " + resumed);
        a.close();
    }
}
