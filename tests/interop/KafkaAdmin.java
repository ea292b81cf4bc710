// Apache Kafka's Java AdminClient (what kafka-configs, kafka-acls, kafka-delete-records and
// kafka-consumer-groups call) against Headwater's Kafka listener (test_kafka_listener.py).
//
// Usage: java -cp <kafka-clients and its jars> KafkaAdmin.java BOOTSTRAP TOPIC GROUP
//
// TOPIC has two partitions and records in partition 0. Prints one line per fact:
//   config <name> <value> <source>      after setting retention.ms and appending to cleanup.policy
//   refused <error class>                a bad retention.ms (nothing changes)
//   acl <principal> <operation> <pattern type> <resource name>
//   acls-deleted <n>
//   low-watermark <offset>               after deleting partition 0's records before offset 1
//   offsets <partition>=<offset>,...     the group's offsets after deleting partition 0's
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public class KafkaAdmin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Map<ConfigResource, Collection<AlterConfigOp>> change = Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)));
            admin.incrementalAlterConfigs(change).all().get();
            try {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get();
                System.out.println("refused nothing");
            } catch (ExecutionException e) {
                System.out.println("refused " + e.getCause().getClass().getSimpleName());
            }
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            for (String name : List.of("retention.ms", "cleanup.policy")) {
                ConfigEntry e = config.get(name);
                System.out.println("config " + name + " " + e.value() + " " + e.source());
            }

            AclBinding acl = new AclBinding(
                    new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry("User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW));
            admin.createAcls(List.of(acl)).all().get();
            AclBindingFilter filter = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.ANY),
                    AccessControlEntryFilter.ANY);
            for (AclBinding b : admin.describeAcls(filter).values().get()) {
                System.out.println("acl " + b.entry().principal() + " " + b.entry().operation() + " "
                        + b.pattern().patternType() + " " + b.pattern().name());
            }
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(filter)).all().get();
            System.out.println("acls-deleted " + deleted.size());

            TopicPartition tp0 = new TopicPartition(topic, 0), tp1 = new TopicPartition(topic, 1);
            long low = admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(1)))
                    .lowWatermarks().get(tp0).get().lowWatermark();
            System.out.println("low-watermark " + low);

            admin.alterConsumerGroupOffsets(group, Map.of(
                    tp0, new OffsetAndMetadata(1), tp1, new OffsetAndMetadata(0))).all().get();
            admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all().get();
            Map<TopicPartition, OffsetAndMetadata> left =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<Integer, Long> shown = new TreeMap<>();
            left.forEach((tp, o) -> shown.put(tp.partition(), o.offset()));
            StringBuilder line = new StringBuilder("offsets");
            String sep = " ";
            for (Map.Entry<Integer, Long> e : shown.entrySet()) {
                line.append(sep).append(e.getKey()).append("=").append(e.getValue());
                sep = ",";
            }
            System.out.println(line);
        }
    }
}
