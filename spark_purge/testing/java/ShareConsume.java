// Test helper: a real Kafka 4.4 consumer, compiled with javac at test time against the broker jars.
//
//   java ShareConsume share    BOOTSTRAP GROUP TOPIC N [TIMEOUT_MS [SETTLE]]
//       Joins share group GROUP (KafkaShareConsumer, share.acknowledgement.mode=explicit),
//       ACCEPTs exactly the first N records it receives, RELEASEs every other record delivered
//       with them, commits the acknowledgements (commitSync) and exits 0.
//       Prints "ACCEPTED <topic> <partition> <offset>" per accepted record and "RELEASED ..." per
//       released one (every delivery, so a caller can count deliveries), then "DONE <n>".
//       SETTLE=1: then one more round, acknowledging nothing new: poll, RELEASE whatever is
//       delivered, commitSync ("SETTLED <k>"). The share-partition leader persists its start
//       offset (SPSO) with the *next* state write, so DescribeShareGroupOffsets trails the
//       in-memory SPSO by one acknowledgement round; this round makes the persisted SPSO exact.
//
//   java ShareConsume share-idle BOOTSTRAP GROUP TOPIC
//       Joins share group GROUP and keeps polling, acknowledging nothing (any record delivered is
//       RELEASEd), printing "JOINED" after its first poll, until stdin reaches EOF: a live share
//       member with an assignment, for ShareGroupDescribe.
//
//   java ShareConsume share-offsets BOOTSTRAP GROUP TOPIC
//       Kafka's own Admin client (listShareGroupOffsets): prints "START <topic> <partition>
//       <offset>" per partition of TOPIC that share group GROUP has a start offset (SPSO) for,
//       then "DONE <k>". Every record below a partition's SPSO is done for the group, in Kafka's
//       own words: acknowledged, or archived at the delivery count limit.
//
//   java ShareConsume consumer BOOTSTRAP GROUP TOPIC [STOP_FILE]
//       Joins GROUP with the KIP-848 protocol (KafkaConsumer, group.protocol=consumer,
//       enable.auto.commit=false), polls without ever committing, prints
//       "ASSIGNED <topic>-<partition>,..." on every assignment change, and exits 0 once stdin
//       reaches EOF or STOP_FILE exists.
//
// Exit code 2: bad arguments; 3: timed out before N records were accepted.
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareConsume {
    private ShareConsume() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: ShareConsume share|share-offsets|share-idle|consumer BOOTSTRAP GROUP TOPIC [N [TIMEOUT_MS]] | [STOP_FILE]");
            System.exit(2);
        }
        String mode = args[0];
        if (mode.equals("share") && args.length >= 5) {
            long timeoutMs = args.length >= 6 ? Long.parseLong(args[5]) : 60_000L;
            boolean settle = args.length >= 7 && args[6].equals("1");
            System.exit(share(args[1], args[2], args[3], Integer.parseInt(args[4]), timeoutMs, settle));
        } else if (mode.equals("share-offsets")) {
            System.exit(shareOffsets(args[1], args[2], args[3]));
        } else if (mode.equals("share-idle")) {
            System.exit(shareIdle(args[1], args[2], args[3]));
        } else if (mode.equals("consumer")) {
            System.exit(consumer(args[1], args[2], args[3], args.length >= 5 ? args[4] : null));
        }
        System.err.println("unknown mode or missing N: " + mode);
        System.exit(2);
    }

    private static Properties base(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "spark-purge-test-" + group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    static int share(String bootstrap, String group, String topic, int n, long timeoutMs, boolean settle) {
        Properties p = base(bootstrap, group);
        p.put("share.acknowledgement.mode", "explicit");
        int accepted = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (accepted < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(500));
                List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>();
                records.forEach(batch::add);
                batch.sort((a, b) -> a.partition() != b.partition()
                        ? Integer.compare(a.partition(), b.partition()) : Long.compare(a.offset(), b.offset()));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    if (accepted < n) {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        accepted++;
                        System.out.println("ACCEPTED " + r.topic() + " " + r.partition() + " " + r.offset());
                    } else {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        System.out.println("RELEASED " + r.topic() + " " + r.partition() + " " + r.offset());
                    }
                }
                if (!batch.isEmpty()) {
                    c.commitSync();
                }
            }
            if (settle && accepted == n) {
                int released = 0;
                while (released == 0 && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(500));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        System.out.println("RELEASED " + r.topic() + " " + r.partition() + " " + r.offset());
                        released++;
                    }
                    if (released > 0) {
                        c.commitSync();
                    }
                }
                System.out.println("SETTLED " + released);
            }
        }
        System.out.println("DONE " + accepted);
        System.out.flush();
        return accepted == n ? 0 : 3;
    }

    static int shareOffsets(String bootstrap, String group, String topic) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (Admin admin = Admin.create(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()
                    .forEach(info -> tps.add(new TopicPartition(topic, info.partition())));
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(tps)))
                    .partitionsToOffsetInfo(group).get();
            int printed = 0;
            for (TopicPartition tp : tps) {
                SharePartitionOffsetInfo info = offsets.get(tp);
                if (info != null && info.startOffset() >= 0) {
                    System.out.println("START " + tp.topic() + " " + tp.partition() + " " + info.startOffset());
                    printed++;
                }
            }
            System.out.println("DONE " + printed);
        }
        System.out.flush();
        return 0;
    }

    static AtomicBoolean stopOnStdinEof() {
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() != -1) {
                    // wait for EOF
                }
            } catch (Exception e) {
                // treat a broken stdin as EOF
            }
            stop.set(true);
        }, "stdin-eof");
        stdin.setDaemon(true);
        stdin.start();
        return stop;
    }

    static int shareIdle(String bootstrap, String group, String topic) {
        Properties p = base(bootstrap, group);
        p.put("share.acknowledgement.mode", "explicit");
        AtomicBoolean stop = stopOnStdinEof();
        boolean joined = false;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                if (!joined) {
                    joined = true;
                    System.out.println("JOINED");
                    System.out.flush();
                }
            }
        }
        System.out.println("STOPPED");
        System.out.flush();
        return 0;
    }

    static int consumer(String bootstrap, String group, String topic, String stopFile) {
        Properties p = base(bootstrap, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        AtomicBoolean stop = stopOnStdinEof();
        Path stopPath = stopFile == null ? null : Paths.get(stopFile);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    TreeSet<String> names = new TreeSet<>();
                    for (TopicPartition tp : c.assignment()) {
                        names.add(tp.topic() + "-" + tp.partition());
                    }
                    System.out.println("ASSIGNED " + String.join(",", names));
                    System.out.flush();
                }
            });
            while (!stop.get() && (stopPath == null || !Files.exists(stopPath))) {
                c.poll(Duration.ofMillis(200));  // positions move, nothing is ever committed
            }
        }
        System.out.println("STOPPED");
        System.out.flush();
        return 0;
    }
}
