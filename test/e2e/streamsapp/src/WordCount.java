import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

/**
 * Word count, the stateful Kafka Streams application coordinatord's end-to-end tests run: a
 * repartition topic (groupBy) and a changelog topic (the count store). Arguments: bootstrap
 * servers, application id, input topic, output topic, group protocol (streams or classic),
 * state directory, and optionally the processing guarantee (at_least_once by default) followed by
 * any number of key=value StreamsConfig settings (application.server=..., num.standby.replicas=...).
 * Prints "STATE <new>" on every state change and stops on stdin EOF or SIGTERM.
 * Its task-assignment log: "TASK + <task> <micros>" when an active task starts processing (its
 * processors are initialised) and "TASK - <task> <micros>" when it stops (they are closed, on
 * revocation, loss or shutdown), with the wall clock in microseconds since the epoch, so that a
 * test can check that no task is processed by two instances at once.
 */
public final class WordCount {
    /** A pass-through processor that logs when its task starts and stops processing. */
    static <K, V> FixedKeyProcessorSupplier<K, V, V> tracked() {
        return () -> new FixedKeyProcessor<K, V, V>() {
            private FixedKeyProcessorContext<K, V> context;
            private TaskId task;

            @Override
            public void init(FixedKeyProcessorContext<K, V> context) {
                this.context = context;
                this.task = context.taskId();
                logTask("+", task);
            }

            @Override
            public void process(FixedKeyRecord<K, V> record) {
                context.forward(record);
            }

            @Override
            public void close() {
                logTask("-", task);
            }
        };
    }

    static synchronized void logTask(String op, TaskId task) {
        Instant now = Instant.now();
        System.out.println("TASK " + op + " " + task + " " + (now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[4]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.length > 6 ? args[6] : StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        p.put(StreamsConfig.consumerPrefix("max.poll.interval.ms"), 30000);
        for (int i = 7; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("setting " + args[i] + " is not key=value");
            }
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

        StreamsBuilder b = new StreamsBuilder();
        b.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .processValues(WordCount.<String, String>tracked())
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((k, word) -> !word.isEmpty())
            .groupBy((k, word) -> word)
            .count(Materialized.as("counts"))
            .toStream()
            .processValues(WordCount.<String, Long>tracked())
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((next, prev) -> {
            System.out.println("STATE " + next);
            System.out.flush();
            if (next == KafkaStreams.State.ERROR || next == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e + (e.getCause() != null ? " CAUSE " + e.getCause() : ""));
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(20))));
        streams.start();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (Exception ignored) {
            }
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        done.await();
        streams.close(Duration.ofSeconds(20));
    }
}
