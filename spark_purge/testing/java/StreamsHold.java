// Test helper: a real Kafka Streams application in a streams group (KIP-1071,
// group.protocol=streams) that holds its tasks and never commits. Compiled with javac at test time
// against the Kafka Streams jars (.cache/jars/kafka-streams); see spark_purge/testing/streams.py.
//
//   java StreamsHold BOOTSTRAP APPLICATION_ID TOPIC STATE_DIR
//       Runs a stateless topology (TOPIC -> a no-op foreach) as application (= streams group)
//       APPLICATION_ID, with commit.interval.ms of a day: the records it processes are never
//       committed. Prints "ASSIGNED <topic>-<partition>,..." each time its active tasks' input
//       partitions change while RUNNING. On stdin EOF it halts the JVM without closing Kafka
//       Streams (a clean close would commit what was processed): the group never gets a commit.
//
// Exit code 2: bad arguments; 4: the application died (state ERROR).
import java.io.InputStream;
import java.time.Duration;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;

public final class StreamsHold {
    private StreamsHold() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: StreamsHold BOOTSTRAP APPLICATION_ID TOPIC STATE_DIR");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.toString(Duration.ofDays(1).toMillis()));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<byte[], byte[]>stream(args[2]).foreach((k, v) -> { });
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR) {
                System.out.println("ERROR");
                System.out.flush();
                Runtime.getRuntime().halt(4);
            }
        });
        streams.start();

        Thread watcher = new Thread(() -> {
            String last = null;
            while (true) {
                if (streams.state() == KafkaStreams.State.RUNNING) {
                    TreeSet<String> names = new TreeSet<>();
                    for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : t.activeTasks()) {
                            for (TopicPartition tp : task.topicPartitions()) {
                                names.add(tp.topic() + "-" + tp.partition());
                            }
                        }
                    }
                    String now = String.join(",", names);
                    if (!names.isEmpty() && !now.equals(last)) {
                        System.out.println("ASSIGNED " + now);
                        System.out.flush();
                        last = now;
                    }
                }
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "assignment-watcher");
        watcher.setDaemon(true);
        watcher.start();

        InputStream in = System.in;
        while (in.read() != -1) {
            // wait for EOF
        }
        System.out.println("STOPPED");
        System.out.flush();
        Runtime.getRuntime().halt(0);  // no close: closing would commit the processed records
    }
}
