import java.io.File;
import java.util.TreeSet;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.internal.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.image.writer.ImageWriterOptions;
import org.apache.kafka.image.writer.RecordListWriter;
import org.apache.kafka.metadata.MetadataRecordSerde;

/**
 * Replays a KRaft metadata log segment or snapshot file (args[0]) into Apache Kafka's own metadata
 * image, as a Kafka broker or kafka-metadata-shell does, then writes the image back at its
 * metadata.version with a loss handler that fails on anything that version cannot represent
 * (BrokerRegistration.toRecord and the like). Prints what the image holds; args[1..] are topics
 * whose configs to print. Exits non-zero on any exception.
 */
public class MetadataImageCheck {
    public static void main(String[] args) throws Exception {
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        long last = -1;
        int records = 0;
        try (FileRecords file = FileRecords.open(new File(args[0]))) {
            for (FileChannelRecordBatch batch : file.batches()) {
                if (batch.isControlBatch()) continue;
                for (Record record : batch) {
                    delta.replay(MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(record.value()),
                                                                  record.valueSize()).message());
                    last = record.offset();
                    records++;
                }
            }
        }
        MetadataImage image = delta.apply(new MetadataProvenance(last, 0, 0L, true));
        RecordListWriter writer = new RecordListWriter();
        image.write(writer, new ImageWriterOptions.Builder(image.features().metadataVersionOrThrow())
            .setLossHandler(e -> { throw e; }).build());
        System.out.println("records " + records);
        System.out.println("metadata.version " + image.features().metadataVersionOrThrow().version());
        System.out.println("topics " + new TreeSet<>(image.topics().topicsByName().keySet()));
        for (String name : new TreeSet<>(image.topics().topicsByName().keySet())) {
            System.out.println("partitions " + name + " " + image.topics().getTopic(name).partitions().size());
        }
        System.out.println("brokers " + new TreeSet<>(image.cluster().brokers().keySet()));
        for (int i = 1; i < args.length; i++) {
            System.out.println("configs " + args[i] + " " + new java.util.TreeMap<>(
                image.configs().configMapForResource(new ConfigResource(ConfigResource.Type.TOPIC, args[i]))));
        }
        System.out.println("written " + writer.records().size());
    }
}
