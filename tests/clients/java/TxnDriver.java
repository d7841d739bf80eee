// A transactional producer (and consume-transform-produce loop) of Kafka's Java clients, driven
// line by line on stdin by tests/clients/test_transactions_tv2.py; compiled once by
// conformance.clients.tool_server.source_command and run with the Kafka jars on the class path
// (or in Java's source-file mode: java -cp '<lib>/*' TxnDriver.java <bootstrap> <transactional id>)
//
// Commands (one per line), each answered by one line: "ok ..." or
// "error <exception class> <class of its cause, or -> <message>":
//   init                                   initTransactions()
//   txn <commit|abort> <topic> <v1,v2,...> beginTransaction, send each value (key = value), end it
//   open <topic> <v1,v2,...>               beginTransaction and send, leaving the transaction open
//   end <commit|abort>                     end the open transaction
//   copy <in> <out> <group> <n>            consume n read_committed records of <in> in <group>, send
//                                          "<value>-copied" to <out> and the consumer's offsets with
//                                          sendOffsetsToTransaction, commit
//   quit

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnDriver {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("transactional.id", args[1]);
        props.put("transaction.timeout.ms", "60000");
        props.put("max.block.ms", "60000");
        props.put("delivery.timeout.ms", "60000");
        props.put("request.timeout.ms", "20000");
        KafkaProducer<String, String> producer =
            new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            try {
                switch (w[0]) {
                    case "init":
                        producer.initTransactions();
                        say("ok");
                        break;
                    case "txn":
                        producer.beginTransaction();
                        send(producer, w[2], w[3]);
                        end(producer, w[1]);
                        say("ok");
                        break;
                    case "open":
                        producer.beginTransaction();
                        send(producer, w[1], w[2]);
                        say("ok");
                        break;
                    case "end":
                        end(producer, w[1]);
                        say("ok");
                        break;
                    case "copy":
                        say("ok " + copy(producer, bootstrap, w[1], w[2], w[3], Integer.parseInt(w[4])));
                        break;
                    case "quit":
                        producer.close(Duration.ofSeconds(10));
                        say("ok");
                        return;
                    default:
                        say("error IllegalArgumentException - unknown command " + w[0]);
                }
            } catch (Exception e) {
                // "error <class> <class of the cause, or -> <message>"
                Throwable t = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null
                    ? e.getCause() : e;
                String cause = t.getCause() == null ? "-" : t.getCause().getClass().getSimpleName();
                say("error " + t.getClass().getSimpleName() + " " + cause + " "
                    + String.valueOf(t.getMessage()).replace('\n', ' '));
            }
        }
    }

    static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }

    static void send(KafkaProducer<String, String> producer, String topic, String values) throws Exception {
        List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
        for (String v : values.split(",")) {
            sent.add(producer.send(new ProducerRecord<>(topic, v, v)));
        }
        producer.flush();
        for (java.util.concurrent.Future<?> f : sent) {
            f.get();
        }
    }

    static void end(KafkaProducer<String, String> producer, String how) {
        if (how.equals("commit")) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
    }

    static int copy(KafkaProducer<String, String> producer, String bootstrap, String inTopic, String outTopic,
                    String group, int n) throws Exception {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("isolation.level", "read_committed");
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(inTopic));
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r);
                }
            }
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : got) {
                producer.send(new ProducerRecord<>(outTopic, r.key(), r.value() + "-copied"));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
            return got.size();
        }
    }
}
