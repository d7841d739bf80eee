// Consumption rate driver for bench/share_groups.py, run with Kafka 4.3.1's kafka-clients in Java's
// source-file mode: java -cp '<kafka lib>/*' PerfClient.java BOOTSTRAP GROUP TOPIC MODE IDLE_MS
// MODE: share (KafkaShareConsumer, implicit acknowledgement: the next poll acknowledges) or group
// (KafkaConsumer in a classic consumer group, auto.offset.reset=earliest, auto-commit).
// Consumes until nothing arrives for IDLE_MS, then prints "LAST <epoch ms of the last record's
// poll> <records>" (a share consumer commits its last acknowledgements before that line).
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

public class PerfClient {
    /** Polls until nothing arrives for idleMs; returns {epoch ms of the last records, count}. */
    static long[] drain(Supplier<ConsumerRecords<byte[], byte[]>> poll, long idleMs) {
        long count = 0, lastData = System.currentTimeMillis();
        while (System.currentTimeMillis() - lastData < idleMs) {
            ConsumerRecords<byte[], byte[]> rs = poll.get();
            if (!rs.isEmpty()) {
                count += rs.count();
                lastData = System.currentTimeMillis();
            }
        }
        return new long[] {lastData, count};
    }

    public static void main(String[] args) {
        String bootstrap = args[0], group = args[1], topic = args[2], mode = args[3];
        long idleMs = Long.parseLong(args[4]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        long[] result;
        if (mode.equals("share")) {
            try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(props)) {
                c.subscribe(List.of(topic));
                result = drain(() -> c.poll(Duration.ofMillis(100)), idleMs);
                c.commitSync();
            }
        } else {
            props.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                c.subscribe(List.of(topic));
                result = drain(() -> c.poll(Duration.ofMillis(100)), idleMs);
                c.commitSync();
            }
        }
        long last = result[0], count = result[1];
        System.out.println("LAST " + last + " " + count);
    }
}
