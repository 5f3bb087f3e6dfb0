import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A plain Java KafkaConsumer in a consumer group: consumes until it has seen the expected number
 * of records, commits synchronously, prints "CONSUMED <n>" and exits 0; exits 1 when the records
 * do not come within the deadline. Arguments: bootstrap servers, group id, topic, expected
 * record count, group protocol (classic or consumer). An expected count below 0 runs until stdin
 * closes instead (a rolling switch stops instances one by one), committing as it goes, and exits 0.
 */
public final class GroupConsumer {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args[4]);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        long expected = Long.parseLong(args[3]);
        boolean untilStdin = expected < 0;
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        if (untilStdin) {
            Thread t = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                    }
                } catch (java.io.IOException e) {
                    // closed: stop as well
                }
                stop.set(true);
            });
            t.setDaemon(true);
            t.start();
        }
        long seen = 0;
        long deadline = System.currentTimeMillis() + (untilStdin ? 600_000 : 90_000);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(args[2]));
            while ((untilStdin ? !stop.get() : seen < expected) && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                seen += rs.count();
                if (!rs.isEmpty()) {
                    c.commitSync();
                }
            }
            c.commitSync();
        }
        System.out.println("CONSUMED " + seen);
        System.exit(untilStdin || seen == expected ? 0 : 1);
    }
}
