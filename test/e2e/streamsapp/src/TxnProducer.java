import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java 4.4 transactional KafkaProducer driven line by line on stdin, so that a test can put a
 * condition in place between two calls and see what the producer makes of it. Arguments:
 * bootstrap servers, transactional.id, then producer configs as key=value. Commands:
 *
 *   init | begin | commit | abort | close
 *   send TOPIC PARTITION VALUE
 *   offsets GROUP TOPIC PARTITION OFFSET [MEMBER_ID GENERATION]   (sendOffsetsToTransaction)
 *
 * Each command answers one line: "OK <command>", or "ERR <command> <exception class>
 * <cause class or -> <message>" when the call threw. Records of a send surface their error at
 * the next commit, as in any application.
 */
public final class TxnProducer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[1]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            p.put(kv[0], kv[1]);
        }
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            String cmd = f[0];
            try {
                switch (cmd) {
                    case "init" -> producer.initTransactions();
                    case "begin" -> producer.beginTransaction();
                    case "commit" -> producer.commitTransaction();
                    case "abort" -> producer.abortTransaction();
                    case "send" -> producer.send(new ProducerRecord<>(f[1], Integer.parseInt(f[2]), null, f[3]));
                    case "offsets" -> {
                        ConsumerGroupMetadata meta = f.length > 6
                                ? new ConsumerGroupMetadata(f[1], Integer.parseInt(f[6]), f[5], Optional.empty())
                                : new ConsumerGroupMetadata(f[1]);
                        producer.sendOffsetsToTransaction(
                                Map.of(new TopicPartition(f[2], Integer.parseInt(f[3])), new OffsetAndMetadata(Long.parseLong(f[4]))), meta);
                    }
                    case "close" -> {
                        producer.close();
                        System.out.println("OK close");
                        return;
                    }
                    default -> throw new IllegalArgumentException("unknown command " + cmd);
                }
                System.out.println("OK " + cmd);
            } catch (Exception e) {
                String cause = e.getCause() == null ? "-" : e.getCause().getClass().getSimpleName();
                System.out.println("ERR " + cmd + " " + e.getClass().getSimpleName() + " " + cause + " "
                        + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            System.out.flush();
        }
        producer.close();
    }
}
