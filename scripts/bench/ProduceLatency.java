// ProduceLatency: produce latency at a fixed rate, as the Kafka proxies publish it (Kroxylicious,
// OpenMessaging Benchmark): records of SIZE bytes at RATE per second for SECONDS, acks=all, one
// producer; each latency in microseconds from the moment the record was due to its
// acknowledgement (a send that starts late counts its lateness: no coordinated omission).
//
//   java ProduceLatency PROPS BOOTSTRAP TOPIC RATE SIZE SECONDS
//
// Prints one JSON line: {"sent":N,"acked":N,"failed":N,"p50_us":…,"p99_us":…,"p999_us":…,
// "max_us":…,"mean_us":…}. The first two seconds are a warm-up, not counted.
import java.io.FileInputStream;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ProduceLatency {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: ProduceLatency PROPS BOOTSTRAP TOPIC RATE SIZE SECONDS");
            System.exit(2);
        }
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            p.load(in);
        }
        p.put("bootstrap.servers", args[1]);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", "all");
        p.put("linger.ms", "0");
        String topic = args[2];
        int rate = Integer.parseInt(args[3]);
        int size = Integer.parseInt(args[4]);
        int seconds = Integer.parseInt(args[5]);
        int warm = 2 * rate;
        int total = warm + seconds * rate;
        long[] lat = new long[total];
        Arrays.fill(lat, -1);
        AtomicInteger failed = new AtomicInteger();
        byte[] value = new byte[size];
        new java.util.Random(1).nextBytes(value);
        long periodNs = 1_000_000_000L / rate;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            // Metadata first, so the first records do not wait for it.
            producer.partitionsFor(topic);
            long start = System.nanoTime();
            for (int i = 0; i < total; i++) {
                long due = start + i * periodNs;
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                final int n = i;
                producer.send(new ProducerRecord<>(topic, value), (md, ex) -> {
                    if (ex != null) {
                        failed.incrementAndGet();
                    } else {
                        lat[n] = (System.nanoTime() - due) / 1000;
                    }
                });
            }
            producer.flush();
        }
        long[] counted = Arrays.stream(lat, warm, total).filter(x -> x >= 0).sorted().toArray();
        int acked = counted.length;
        System.out.printf(
            "{\"sent\":%d,\"acked\":%d,\"failed\":%d,\"p50_us\":%d,\"p99_us\":%d,\"p999_us\":%d,"
                + "\"max_us\":%d,\"mean_us\":%.1f}%n",
            total - warm, acked, failed.get(), pct(counted, 50), pct(counted, 99),
            pct(counted, 99.9), acked == 0 ? -1 : counted[acked - 1],
            Arrays.stream(counted).average().orElse(-1));
    }

    /** The nearest-rank percentile of sorted values (-1 when there are none). */
    static long pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return -1;
        }
        int rank = (int) Math.ceil(q / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }
}
