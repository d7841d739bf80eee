// Consumption rate driver for bench/share_groups.py, run with Kafka 4.3.1's kafka-clients in Java's
// source-file mode: java -cp '<kafka lib>/*' PerfClient.java BOOTSTRAP GROUP TOPIC MODE IDLE_MS
// MODE: share (KafkaShareConsumer, implicit acknowledgement: the next poll acknowledges) or group
// (KafkaConsumer in a classic consumer group, auto.offset.reset=earliest, auto-commit).
// Consumes until nothing arrives for IDLE_MS, then prints "LAST <epoch ms of the last record's
// poll> <records>" (a share consumer commits its last acknowledgements before that line).
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

public class PerfClient {
    public static void main(String[] args) {
        String bootstrap = args[0], group = args[1], topic = args[2], mode = args[3];
        long idleMs = Long.parseLong(args[4]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        long count = 0, last = System.currentTimeMillis(), lastData = last;
        if (mode.equals("share")) {
            try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(props)) {
                c.subscribe(List.of(topic));
                while (System.currentTimeMillis() - lastData < idleMs) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                    if (!rs.isEmpty()) {
                        count += rs.count();
                        lastData = System.currentTimeMillis();
                    }
                }
                c.commitSync();
                last = lastData;
            }
        } else {
            props.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                c.subscribe(List.of(topic));
                while (System.currentTimeMillis() - lastData < idleMs) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                    if (!rs.isEmpty()) {
                        count += rs.count();
                        lastData = System.currentTimeMillis();
                    }
                }
                c.commitSync();
                last = lastData;
            }
        }
        System.out.println("LAST " + last + " " + count);
    }
}
