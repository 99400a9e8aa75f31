// Share groups (KIP-932) through the endpoint (scripts/conformance), compiled against
// kafka-clients 4.1.1, run on the laptop after ClusterAdmin's share-group (on the server):
//   java -cp 'JARS/*:CLASSES' ShareConformance BOOTSTRAP TOPIC GROUP COUNT
// It lists the brokers, produces COUNT records, reads them back in share group GROUP with a
// KafkaShareConsumer, each acknowledged, then prints one JSON line as Conformance does. Any
// failure is the exception's class and message on stderr, exit 1.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.serialization.*;

public class ShareConformance {
    public static void main(String[] a) throws Exception {
        client(a[0], a[1], a[2], Integer.parseInt(a[3]));
    }

    static void client(String bootstrap, String topic, String group, int count) throws Exception {
        Properties base = new Properties();
        base.put("bootstrap.servers", bootstrap);
        base.put("client.id", "conformance-java-share");

        List<String> brokers = new ArrayList<>();
        try (Admin admin = Admin.create(base)) {
            for (Node n : admin.describeCluster().nodes().get()) {
                brokers.add(n.host() + ":" + n.port());
            }
        }

        Properties p = new Properties();
        p.putAll(base);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            producer.flush();
        }

        Properties c = new Properties();
        c.putAll(base);
        c.put("group.id", group);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        Set<String> seen = new HashSet<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long end = System.currentTimeMillis() + 60_000;
            while (seen.size() < count && System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    seen.add(r.value());
                }
            }
            // Every record delivered is acknowledged (implicitly, as accepted) by this commit.
            consumer.commitSync();
        }
        System.out.printf(
            "{\"brokers\": [%s], \"produced\": %d, \"consumed\": %d, \"committed\": true}%n",
            String.join(", ", brokers.stream().map(b -> "\"" + b + "\"").toList()),
            count, seen.size());
    }
}
