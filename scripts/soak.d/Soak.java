// scripts/soak.d/Soak.java — the soak's Java clients (scripts/soak compiles it with javac against
// the stack's Kafka 4.1.1 jars; no build tool). One JVM per role:
//
//   java Soak produce PROPS TOPIC ID RATE SECONDS SIZE     an idempotent producer at RATE records/s
//   java Soak consume PROPS TOPIC GROUP PROTOCOL           a consumer in GROUP (classic | consumer)
//
// PROPS is the profile's client.properties (the local endpoint: plaintext, no keystore). Every
// event is one line on stdout, flushed twice a second, for scripts/soak.d/soak.py to read:
//
//   A seq due_ms latency_us partition offset    acknowledged (latency from the scheduled send time)
//   F seq due_ms latency_us KIND                delivery failed
//   C ms key partition offset                   consumed (key = producer:seq)
//   G ms assigned|revoked|lost N                the group gave or took partitions
//   E ms KIND message                           an error the application saw
//   R ms KIND                                   the client was made again after a fatal error
//   D ms count                                  done (records sent, or consumed)
//
// Latency counts from the time the record was due, not from the send() call: a send() that
// blocks (no metadata while the tunnel is frozen) is part of what the application waits.

import java.io.BufferedOutputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Soak {
    private static final PrintStream OUT =
        new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, StandardCharsets.UTF_8);
    private static final AtomicBoolean STOP = new AtomicBoolean();

    private Soak() {}

    public static void main(String[] args) throws Exception {
        Thread flusher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
                synchronized (OUT) {
                    OUT.flush();
                }
            }
        });
        flusher.setDaemon(true);
        flusher.start();
        switch (args.length > 0 ? args[0] : "") {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            default -> {
                System.err.println("usage: Soak produce PROPS TOPIC ID RATE SECONDS SIZE | consume PROPS TOPIC GROUP PROTOCOL");
                System.exit(2);
            }
        }
        synchronized (OUT) {
            OUT.flush();
        }
    }

    private static void line(String text) {
        synchronized (OUT) {
            OUT.println(text);
        }
    }

    private static Properties load(String path) throws IOException {
        Properties p = new Properties();
        try (InputStream in = new FileInputStream(path)) {
            p.load(in);
        }
        return p;
    }

    /** The error's kind: its class, and the class of its cause when that says more. */
    private static String kind(Throwable e) {
        String k = e.getClass().getSimpleName();
        Throwable c = e.getCause();
        if (c != null && c != e && !c.getClass().equals(e.getClass())) {
            k += "/" + c.getClass().getSimpleName();
        }
        return k;
    }

    private static String oneLine(Throwable e) {
        String m = String.valueOf(e.getMessage());
        return m.replace('\n', ' ').replace('\r', ' ');
    }

    /** Whether the client must be made again: the error is not one the client retries. */
    private static boolean fatal(RuntimeException e) {
        return e instanceof AuthenticationException
            || e instanceof AuthorizationException
            || e instanceof IllegalStateException
            || e.getClass().getSimpleName().contains("Fenced")
            || e.getClass().getSimpleName().contains("OutOfOrderSequence");
    }

    // ---------------------------------------------------------------------------------------
    // The producer
    // ---------------------------------------------------------------------------------------

    private static KafkaProducer<String, byte[]> newProducer(Properties base, String id) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("client.id", "soak-" + id);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    private static void produce(String[] args) throws Exception {
        Properties base = load(args[1]);
        String topic = args[2];
        String id = args[3];
        double rate = Double.parseDouble(args[4]);
        long seconds = Long.parseLong(args[5]);
        int size = Integer.parseInt(args[6]);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> STOP.set(true)));

        KafkaProducer<String, byte[]> producer = newProducer(base, id);
        long intervalNs = (long) (1e9 / rate);
        long startNs = System.nanoTime();
        long startMs = System.currentTimeMillis();
        long endNs = startNs + seconds * 1_000_000_000L;
        long seq = 0;
        while (!STOP.get()) {
            long dueNs = startNs + seq * intervalNs;
            if (dueNs >= endNs) {
                break;
            }
            long wait = dueNs - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            final long s = seq;
            final long dueMs = startMs + (dueNs - startNs) / 1_000_000;
            byte[] value = new byte[size];
            byte[] head = (id + ":" + s + ":").getBytes(StandardCharsets.US_ASCII);
            System.arraycopy(head, 0, value, 0, Math.min(head.length, size));
            try {
                producer.send(new ProducerRecord<>(topic, id + ":" + s, value), (md, ex) -> {
                    long lat = (System.nanoTime() - dueNs) / 1000;
                    if (ex == null) {
                        line("A " + s + " " + dueMs + " " + lat + " " + md.partition() + " " + md.offset());
                    } else {
                        line("F " + s + " " + dueMs + " " + lat + " " + kind(ex));
                    }
                });
            } catch (InterruptException e) {
                break;
            } catch (KafkaException | IllegalStateException e) {
                long lat = (System.nanoTime() - dueNs) / 1000;
                line("F " + s + " " + dueMs + " " + lat + " " + kind(e));
                line("E " + System.currentTimeMillis() + " " + kind(e) + " " + oneLine(e));
                if (fatal(e)) {
                    line("R " + System.currentTimeMillis() + " " + kind(e));
                    try {
                        producer.close(Duration.ofSeconds(5));
                    } catch (KafkaException ignored) {
                        // Closing a producer in a fatal state may fail too; a new one follows.
                    }
                    producer = newProducer(base, id);
                }
            }
            seq++;
        }
        // Every record sent gets its answer (ack or failure) before the process ends.
        producer.flush();
        producer.close(Duration.ofSeconds(30));
        line("D " + System.currentTimeMillis() + " " + seq);
    }

    // ---------------------------------------------------------------------------------------
    // The consumer
    // ---------------------------------------------------------------------------------------

    private static KafkaConsumer<String, byte[]> newConsumer(Properties base, String group, String protocol) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("client.id", group);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    private static void consume(String[] args) throws Exception {
        Properties base = load(args[1]);
        String topic = args[2];
        String group = args[3];
        String protocol = args[4];
        AtomicReference<KafkaConsumer<String, byte[]>> holder =
            new AtomicReference<>(newConsumer(base, group, protocol));
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            STOP.set(true);
            holder.get().wakeup();
            try {
                main.join(30_000);
            } catch (InterruptedException ignored) {
                // The JVM is ending anyway.
            }
        }));
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                line("G " + System.currentTimeMillis() + " revoked " + parts.size());
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                line("G " + System.currentTimeMillis() + " assigned " + parts.size());
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                line("G " + System.currentTimeMillis() + " lost " + parts.size());
            }
        };
        holder.get().subscribe(List.of(topic), listener);
        long count = 0;
        int errorsInARow = 0;
        while (!STOP.get()) {
            try {
                ConsumerRecords<String, byte[]> records = holder.get().poll(Duration.ofMillis(500));
                long now = System.currentTimeMillis();
                for (ConsumerRecord<String, byte[]> r : records) {
                    line("C " + now + " " + r.key() + " " + r.partition() + " " + r.offset());
                    count++;
                }
                errorsInARow = 0;
            } catch (WakeupException | InterruptException e) {
                break;
            } catch (KafkaException e) {
                line("E " + System.currentTimeMillis() + " " + kind(e) + " " + oneLine(e));
                errorsInARow++;
                if (fatal(e) || errorsInARow >= 20) {
                    line("R " + System.currentTimeMillis() + " " + kind(e));
                    try {
                        holder.get().close(CloseOptions.timeout(Duration.ofSeconds(5)));
                    } catch (KafkaException ignored) {
                        // A new consumer follows.
                    }
                    holder.set(newConsumer(base, group, protocol));
                    holder.get().subscribe(List.of(topic), listener);
                    errorsInARow = 0;
                }
                Thread.sleep(500);
            }
        }
        try {
            holder.get().close(CloseOptions.timeout(Duration.ofSeconds(10)));
        } catch (KafkaException e) {
            line("E " + System.currentTimeMillis() + " " + kind(e) + " " + oneLine(e));
        }
        line("D " + System.currentTimeMillis() + " " + count);
    }
}
