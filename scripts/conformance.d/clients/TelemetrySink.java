// A broker plugin for scripts/conformance: a client-telemetry receiver (KIP-714). A broker
// advertises GetTelemetrySubscriptions and PushTelemetry only when a metrics reporter that
// implements ClientTelemetry is configured; with this one (metric.reporters=TelemetrySink, set
// cluster-wide by ClusterAdmin telemetry on), each push a client makes is one line in the node's
// log folder, client-telemetry.log:
//   EPOCH_MS PRINCIPAL CLIENT_ID CLIENT_INSTANCE_ID BYTES TERMINATING
// Compiled against kafka-clients 4.1.1 (the interfaces are Kafka 3.7's); loaded from the
// brokers' plugins folder (scripts/stack info kafka_plugins).
import java.io.FileWriter;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;

public class TelemetrySink implements MetricsReporter, ClientTelemetry {
    private final Path log = Path.of(System.getProperty("kafka.logs.dir", "."), "client-telemetry.log");

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> {
            String line = String.format("%d %s %s %s %d %s%n", System.currentTimeMillis(),
                context.principal().getName().replace(' ', '_'), context.clientId().replace(' ', '_'),
                payload.clientInstanceId(), payload.data().remaining(), payload.isTerminating());
            synchronized (this) {
                try (FileWriter w = new FileWriter(log.toFile(), true)) {
                    w.write(line);
                } catch (IOException e) {
                    throw new RuntimeException("client-telemetry.log: " + e.getMessage(), e);
                }
            }
        };
    }

    @Override public void init(List<KafkaMetric> metrics) {}
    @Override public void metricChange(KafkaMetric metric) {}
    @Override public void metricRemoval(KafkaMetric metric) {}
    @Override public void close() {}
    @Override public void configure(Map<String, ?> configs) {}
}
