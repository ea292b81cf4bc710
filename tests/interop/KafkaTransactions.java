// Apache Kafka's transactional producer against Headwater's Kafka listener
// (test_kafka_transactions_v2.py), compiled against whichever kafka-clients is on the class
// path: 4.x speaks transaction version 2 (KIP-890 part 2) when the broker finalizes it, 3.9
// speaks version 1.
//
// Usage: java -cp <kafka-clients and its jars> KafkaTransactions.java BOOTSTRAP TOPIC TID GROUP
//
// Three transactions on TOPIC's partitions 0 and 1, each writing "<name>-0" and "<name>-1"
// and committing GROUP's offset of partition 0 (sendOffsetsToTransaction): c1 commits with
// offset 7, a2 aborts with offset 99, c3 commits with offset 11.  The transaction
// coordinator's view (DescribeTransactions) is printed after initTransactions, inside each
// transaction and after each end; then GROUP's committed offset.  One line per fact:
//   txn <step> <state> <producer id> <producer epoch>
//   group-offset <offset>
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTransactions {
    static Admin admin;
    static String tid;

    static void describe(String step) throws Exception {
        TransactionDescription d =
            admin.describeTransactions(List.of(tid)).description(tid).get();
        System.out.println(
            "txn " + step + " " + d.state() + " " + d.producerId() + " " + d.producerEpoch());
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[3];
        tid = args[2];
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        admin = Admin.create(a);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", tid);
        p.put("transaction.timeout.ms", "60000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        TopicPartition offsetsOf = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            describe("init");
            String[] names = {"c1", "a2", "c3"};
            long[] offsets = {7, 99, 11};
            for (int i = 0; i < names.length; i++) {
                producer.beginTransaction();
                for (int partition = 0; partition < 2; partition++) {
                    byte[] value = (names[i] + "-" + partition).getBytes("UTF-8");
                    producer.send(new ProducerRecord<>(topic, partition, null, value)).get();
                }
                producer.sendOffsetsToTransaction(
                    Map.of(offsetsOf, new OffsetAndMetadata(offsets[i])),
                    new ConsumerGroupMetadata(group));
                describe(names[i] + "-open");
                if (names[i].startsWith("c")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                describe(names[i] + "-ended");
            }
        }
        OffsetAndMetadata committed =
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .get(offsetsOf);
        System.out.println("group-offset " + (committed == null ? -1 : committed.offset()));
        admin.close();
    }
}
