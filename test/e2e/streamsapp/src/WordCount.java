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

    /**
     * A line on stdin: "meta" prints what Interactive Queries would route by (one "META host:port
     * active=... standby=... stores=..." line per instance of metadataForAllStreamsClients, one
     * "KEY word partition active standbys" line per word of the counts store), then "META END";
     * "add-thread" and "remove-thread" change the number of stream threads ("THREAD + name",
     * "THREAD - name", "THREAD none").
     */
    static void command(KafkaStreams streams, String line) {
        // Not synchronized on the class: removing a thread waits for it to close its tasks,
        // which log through logTask.
        try {
            switch (line) {
                case "meta":
                    for (org.apache.kafka.streams.StreamsMetadata m : streams.metadataForAllStreamsClients()) {
                        System.out.println("META " + m.host() + ":" + m.port() + " active=" + partitions(m.topicPartitions())
                            + " standby=" + partitions(m.standbyTopicPartitions()) + " stores=" + new java.util.TreeSet<>(m.stateStoreNames()));
                    }
                    for (String word : new String[] {"kafka", "streams", "coordinator", "gateway", "group", "offset", "topology", "task"}) {
                        org.apache.kafka.streams.KeyQueryMetadata k = streams.queryMetadataForKey("counts", word, Serdes.String().serializer());
                        java.util.TreeSet<String> standbys = new java.util.TreeSet<>();
                        for (org.apache.kafka.streams.state.HostInfo h : k.standbyHosts()) {
                            standbys.add(h.host() + ":" + h.port());
                        }
                        System.out.println("KEY " + word + " " + k.partition() + " " + k.activeHost().host() + ":" + k.activeHost().port() + " " + standbys);
                    }
                    System.out.println("META END");
                    break;
                case "add-thread":
                    System.out.println("THREAD + " + streams.addStreamThread().orElse("none"));
                    break;
                case "remove-thread":
                    System.out.println("THREAD - " + streams.removeStreamThread(Duration.ofSeconds(30)).orElse("none"));
                    break;
                default:
                    System.out.println("UNKNOWN COMMAND " + line);
            }
        } catch (RuntimeException e) {
            System.out.println("COMMAND FAILED " + line + " " + e);
        }
        System.out.flush();
    }

    static String partitions(java.util.Set<org.apache.kafka.common.TopicPartition> tps) {
        java.util.TreeSet<String> out = new java.util.TreeSet<>();
        for (org.apache.kafka.common.TopicPartition tp : tps) {
            out.add(tp.topic() + "/" + tp.partition());
        }
        return String.join(",", out);
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
                java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
                for (String line; (line = in.readLine()) != null; ) {
                    command(streams, line.trim());
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
