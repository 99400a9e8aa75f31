// The admin's part of some conformance cells (scripts/conformance), run on the server with the
// stack's own Kafka jars and the admin's client config; compiled against kafka-clients 4.1.1,
// each verb uses only Admin calls its releases have:
//   java -cp 'KAFKA_LIBS/*:CLASSES' ClusterAdmin share-group BOOTSTRAP ADMIN_PROPERTIES GROUP
//       share.version=1 (Kafka 4.1 leaves share groups off) and the group's
//       share.auto.offset.reset=earliest (a share group starts at the latest offset by default,
//       after the records its client produced first)
//   java -cp 'KAFKA_LIBS/*:CLASSES' ClusterAdmin reassign BOOTSTRAP ADMIN_PROPERTIES TOPIC R1,R2,...
//       partition 0 of TOPIC moved to those brokers, waiting until the move is done
//   java -cp 'KAFKA_LIBS/*:CLASSES' ClusterAdmin telemetry BOOTSTRAP ADMIN_PROPERTIES on|off
//       client telemetry (KIP-714): on, every broker's metric.reporters (cluster-wide, dynamic)
//       is TelemetrySink (from the plugins folder) and the client-metrics subscription
//       `conformance` asks every client for all its metrics each second; off, both removed
// Any failure is the exception's class and message on stderr, exit 1.
import java.io.FileInputStream;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class ClusterAdmin {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(a[2])) {
            p.load(in);
        }
        p.put("bootstrap.servers", a[1]);
        try (Admin admin = Admin.create(p)) {
            switch (a[0]) {
                case "share-group" -> shareGroup(admin, a[3]);
                case "reassign" -> reassign(admin, a[3], a[4]);
                case "telemetry" -> telemetry(admin, a[3].equals("on"));
                default -> throw new IllegalArgumentException("unknown verb " + a[0]);
            }
        }
    }

    static void shareGroup(Admin admin, String group) throws Exception {
        var share = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("share.version");
        if (share == null || share.maxVersionLevel() < 1) {
            admin.updateFeatures(
                Map.of("share.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                new UpdateFeaturesOptions()).all().get();
        }
        var resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        var op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
    }

    static void telemetry(Admin admin, boolean on) throws Exception {
        var brokers = new ConfigResource(ConfigResource.Type.BROKER, "");
        var subscription = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, "conformance");
        AlterConfigOp.OpType op = on ? AlterConfigOp.OpType.SET : AlterConfigOp.OpType.DELETE;
        admin.incrementalAlterConfigs(Map.of(
            brokers, List.of(new AlterConfigOp(new ConfigEntry("metric.reporters", "TelemetrySink"), op)),
            subscription, List.of(
                new AlterConfigOp(new ConfigEntry("metrics", "*"), op),
                new AlterConfigOp(new ConfigEntry("interval.ms", "1000"), op)))).all().get();
    }

    static void reassign(Admin admin, String topic, String replicas) throws Exception {
        var tp = new TopicPartition(topic, 0);
        List<Integer> to = Arrays.stream(replicas.split(",")).map(Integer::valueOf).toList();
        admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(to)))).all().get();
        long end = System.currentTimeMillis() + 60_000;
        while (admin.listPartitionReassignments(Set.of(tp)).reassignments().get().containsKey(tp)) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("the reassignment of " + tp + " was not done in 60 s");
            }
            Thread.sleep(200);
        }
    }
}
