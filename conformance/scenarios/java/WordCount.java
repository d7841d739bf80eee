// Kafka Streams word count for kcompat's conformance suite (ecosystem group), compiled once
// (conformance.clients.tool_server.source_command) against the kafka-streams jar of the release
// under test, or run in Java's source-file mode:
//   java -cp '<apps lib>/*' WordCount.java BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR
// The classic topology: lines from INPUT split into lower-case words, re-keyed by word (a repartition
// topic), counted in a state store, the counts written to OUTPUT (String key, Long value), with
// processing.guarantee=exactly_once_v2. Extra Streams settings come as key=value lines on stdin
// (ending with an empty line or EOF). Prints one line per state change on stdout:
//   STATE <new state> <active tasks' input partitions, comma-separated topic-partition>
// then, on RUNNING, the ids of its active tasks (subtopology_partition, comma-separated):
//   TASKS <task ids>
// and "CLOSED" after a clean close (SIGTERM); a kill -9 leaves an open transaction behind.
// With group.protocol=streams on stdin the application uses the KIP-1071 streams rebalance protocol.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

public class WordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null && !line.isEmpty(); line = in.readLine()) {
            int eq = line.indexOf('=');
            props.put(line.substring(0, eq), line.substring(eq + 1));
        }
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((k, w) -> !w.isEmpty())
            .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
            .count()
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            List<String> parts = new ArrayList<>();
            if (now == KafkaStreams.State.RUNNING) {
                for (ThreadMetadata t : streams.metadataForLocalThreads())
                    for (TaskMetadata task : t.activeTasks())
                        for (TopicPartition tp : task.topicPartitions())
                            if (tp.topic().equals(args[2])) parts.add(tp.toString());
            }
            Collections.sort(parts);
            System.out.println("STATE " + now + " " + String.join(",", parts));
            if (now == KafkaStreams.State.RUNNING) {
                List<String> tasks = new ArrayList<>();
                for (ThreadMetadata t : streams.metadataForLocalThreads())
                    for (TaskMetadata task : t.activeTasks())
                        tasks.add(task.taskId().toString());
                Collections.sort(tasks);
                System.out.println("TASKS " + String.join(",", tasks));
            }
            System.out.flush();
        });
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            System.out.println("CLOSED");
            System.out.flush();
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}
