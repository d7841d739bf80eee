// A share consumer for kcompat's tests (KIP-932), run with Kafka 4.3.1's kafka-clients, compiled
// once by conformance.clients.tool_server.source_command (or in Java's source-file mode):
// java -cp '<kafka lib>/*' ShareClient.java BOOTSTRAP GROUP TOPIC MODE MAX IDLE_MS
//
// MODE: implicit (share.acknowledgement.mode=implicit), accept, release (every delivery released),
// release-once (released on its first delivery, accepted later), reject, hold (acknowledges
// nothing: keeps its first records locked until killed).
// Prints one line per record, "R <partition> <offset> <deliveryCount> <value>", "C ok" or
// "C <error>" after each commitSync, and "DONE <records>" when MAX records were processed or
// nothing arrived for IDLE_MS.
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;

public class ShareClient {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], mode = args[3];
        long max = Long.parseLong(args[4]);
        long idleMs = Long.parseLong(args[5]);
        // optional: how long to wait for the first record (default idleMs), for a test that
        // produces only once every consumer of the group has its assignment
        long firstIdleMs = args.length > 6 ? Long.parseLong(args[6]) : idleMs;
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", "share-" + mode);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        props.put("share.acknowledgement.mode", mode.equals("implicit") ? "implicit" : "explicit");
        long seen = 0;
        long lastData = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            System.out.println("STARTED");
            System.out.flush();
            while (seen < max && System.currentTimeMillis() - lastData < (seen == 0 ? firstIdleMs : idleMs)) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                lastData = System.currentTimeMillis();
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    out.append("R ").append(r.partition()).append(' ').append(r.offset()).append(' ')
                       .append(count).append(' ').append(r.value()).append('\n');
                    seen++;
                    switch (mode) {
                        case "implicit": case "hold": break;
                        case "accept": consumer.acknowledge(r, AcknowledgeType.ACCEPT); break;
                        case "release": consumer.acknowledge(r, AcknowledgeType.RELEASE); break;
                        case "reject": consumer.acknowledge(r, AcknowledgeType.REJECT); break;
                        case "release-once":
                            consumer.acknowledge(r, count <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                            break;
                        default: throw new IllegalArgumentException("unknown mode " + mode);
                    }
                }
                System.out.print(out);
                System.out.flush();
                if (mode.equals("hold")) {
                    System.out.println("HOLDING");
                    System.out.flush();
                    Thread.sleep(Long.MAX_VALUE);
                }
                Map<TopicIdPartition, java.util.Optional<KafkaException>> result = consumer.commitSync();
                String err = null;
                for (java.util.Optional<KafkaException> e : result.values()) {
                    if (e.isPresent()) {
                        err = e.get().getClass().getSimpleName() + ":" + e.get().getMessage();
                    }
                }
                System.out.println(err == null ? "C ok" : "C " + err);
                System.out.flush();
            }
        }
        System.out.println("DONE " + seen);
        System.out.flush();
    }
}
