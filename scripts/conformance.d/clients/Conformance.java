// The Java client's conformance scenario (scripts/conformance), compiled once and run on
// whichever kafka-clients jars are on the class path:
//   java -cp 'JARS/*:CLASSES' Conformance BOOTSTRAP TOPIC GROUP COUNT PROTOCOL TRANSACTIONS [MODE RATE]
// PROTOCOL: classic | consumer (KIP-848). TRANSACTIONS: yes | no. MODE: all (the default) |
// produce | consume (the events scenario runs one of each at once); RATE: records a second
// when producing (0: as fast as it can).
// It lists the brokers (AdminClient), produces COUNT records (in one transaction when asked),
// reads them back in GROUP and commits, then prints one JSON line with what it saw; any failure
// is the exception's class and message on stderr, exit 1.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.serialization.*;

public class Conformance {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1], group = a[2], protocol = a[4];
        int count = Integer.parseInt(a[3]);
        boolean tx = a[5].equals("yes");
        String mode = a.length > 6 ? a[6] : "all";
        int rate = a.length > 7 ? Integer.parseInt(a[7]) : 0;
        Properties base = new Properties();
        base.put("bootstrap.servers", bootstrap);
        base.put("client.id", "conformance-java");

        List<String> brokers = new ArrayList<>();
        try (Admin admin = Admin.create(base)) {
            for (Node n : admin.describeCluster().nodes().get()) {
                brokers.add(n.host() + ":" + n.port());
            }
        }

        int produced = 0;
        if (!mode.equals("consume")) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        if (tx) p.put("transactional.id", group + "-tx");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            if (tx) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            for (int i = 0; i < count; i++) {
                var sent = producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
                if (rate > 0) {
                    sent.get();
                    Thread.sleep(1000 / rate);
                }
                produced++;
            }
            if (tx) producer.commitTransaction();
            producer.flush();
        }
        }

        Set<String> seen = new HashSet<>();
        if (!mode.equals("produce")) {
        Properties c = new Properties();
        c.putAll(base);
        c.put("group.id", group);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("isolation.level", "read_committed");
        if (protocol.equals("consumer")) {
            c.put("group.protocol", "consumer");
        }
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long end = System.currentTimeMillis() + (mode.equals("consume") ? 150_000 : 60_000);
            while (seen.size() < count && System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    seen.add(r.value());
                }
            }
            consumer.commitSync();
        }
        }
        System.out.printf(
            "{\"brokers\": [%s], \"produced\": %d, \"consumed\": %d, \"committed\": true}%n",
            String.join(", ", brokers.stream().map(b -> "\"" + b + "\"").toList()),
            produced, seen.size());
    }
}
