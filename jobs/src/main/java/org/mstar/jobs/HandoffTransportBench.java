package org.mstar.jobs;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.mstar.engine.PrefillHandoff;
import org.mstar.flink.HandoffRecords;
import org.mstar.resources.kv.KvBytesGone;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvBytesTicket;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import picocli.CommandLine;

/**
 * The transport of a hand-off between a prefill-side and a decode-side task, without engines: a task in the default
 * slot sharing group makes a KV-sized payload per hand-off and sends it to a task in group {@code decode}, keyed by
 * request id, as the disaggregated operators do. {@link Transport#RECORDS}: the payload cut into {@link KvHandoff}
 * records ({@link HandoffRecords}, Avro, Flink's network) and joined on the decode side. {@link Transport#TICKET}: the
 * payload offered on the sending TaskManager's {@link KvBytesServer}, one record with the ticket, the decode side
 * pulling the bytes over TCP and checking their CRC32C; the table is followed by the receiving TaskManager's pull
 * counts ({@link KvBytesServer#pullCounts}), which show the pulls went over TCP and none failed. Latency: from the sender's clock before cutting or offering to
 * the receiver's once the bytes are whole (one host: one clock); within it, the sender's offer (or cutting into
 * records) and the receiver's pull (or joining the records) are timed too, the rest being Flink's delivery of the
 * records. Device copies and engine steps are outside it.
 */
final class HandoffTransportBench {
    private static final String KV = "kv";

    enum Transport { RECORDS, TICKET }

    private HandoffTransportBench() {}

    static int run(BenchHandoffCommand flags, CommandLine cli) throws Exception {
        PrintWriter out = cli.getOut();
        List<String> rows = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        for (Transport transport : flags.transports) {
            Map<Integer, List<long[]>> timings = new TreeMap<>();
            Map<Integer, List<Double>> memcpy = new TreeMap<>();
            String[] pulls = {null};
            // run locally (no cluster), the two slot sharing groups need a slot each; a cluster has its own slots
            Configuration local = new Configuration();
            local.set(TaskManagerOptions.NUM_TASK_SLOTS, 2);
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(local);
            try (CloseableIterator<String> results = job(env, flags, transport)
                    .executeAndCollect("mstar bench-handoff " + transport.name().toLowerCase())) {
                results.forEachRemaining(line -> {
                    String[] f = line.split(" ");
                    timings.computeIfAbsent(Integer.parseInt(f[0]), k -> new ArrayList<>()).add(new long[] {
                            Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3])});
                    memcpy.computeIfAbsent(Integer.parseInt(f[0]), k -> new ArrayList<>()).add(Double.parseDouble(f[4]));
                    pulls[0] = f[5];
                });
            }
            if (transport == Transport.TICKET) {
                notes.add("ticket: the receiving TaskManager's pulls (brought / failed), " + pulls[0]);
            }
            timings.forEach((tokens, micros) -> rows.add(row(transport, tokens, micros, flags.kvBytesPerToken,
                    memcpy.get(tokens))));
        }
        out.println("| transport | prompt tokens | hand-off MiB | hand-offs | GB/s (total bytes / total latency)"
                + " | latency p50 / p99 ms | offer p50 ms | pull p50 ms | GB/s (bytes / pull p50)"
                + " | memcpy GB/s on the receiver, median |");
        out.println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        rows.forEach(out::println);
        notes.forEach(out::println);
        out.flush();
        return 0;
    }

    /** {@code micros}: per hand-off its latency, the sender's offer (or cut) and the receiver's pull (or join). */
    private static String row(Transport t, int tokens, List<long[]> micros, int bytesPerToken, List<Double> memcpy) {
        double[] copies = memcpy.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        long[] sorted = sorted(micros, 0);
        long bytes = (long) tokens * bytesPerToken;
        double seconds = Arrays.stream(sorted).sum() / 1e6;
        long pull = pct(sorted(micros, 2), 0.5);
        return String.format("| %s | %d | %.0f | %d | %.2f | %.1f / %.1f | %.1f | %.1f | %.2f | %.2f |",
                t.name().toLowerCase(), tokens, bytes / 1048576.0, sorted.length, bytes * sorted.length / seconds / 1e9,
                pct(sorted, 0.50) / 1e3, pct(sorted, 0.99) / 1e3, pct(sorted(micros, 1), 0.5) / 1e3, pull / 1e3,
                bytes / (pull * 1e3), copies[copies.length / 2]);
    }

    private static long[] sorted(List<long[]> rows, int column) {
        return rows.stream().mapToLong(r -> r[column]).sorted().toArray();
    }

    /** Nearest-rank percentile. */
    private static long pct(long[] sorted, double p) {
        return sorted[Math.max(0, (int) Math.ceil(p * sorted.length) - 1)];
    }

    private static DataStream<String> job(StreamExecutionEnvironment env, BenchHandoffCommand flags,
                                          Transport transport) {
        int n = flags.promptLens.size() * flags.repeats;
        return env.fromSequence(0, n - 1).setParallelism(1)
                .process(new Sender(transport, flags.promptLens, flags.repeats, flags.kvBytesPerToken,
                        flags.recordBytes, flags.intervalMillis, flags.host), new AvroTypeInfo<>(KvHandoff.class))
                .setParallelism(1).name("prefill side")
                .keyBy(h -> h.getRequestId().toString(), Types.STRING)
                .process(new Receiver(transport), Types.STRING).setParallelism(1).name("decode side")
                .slotSharingGroup("decode");
    }

    /** Hand-off i carries the KV of a prompt of {@code promptLens[i / repeats]} tokens. */
    private static final class Sender extends ProcessFunction<Long, KvHandoff> {
        private final Transport transport;
        private final List<Integer> promptLens;
        private final int repeats;
        private final int bytesPerToken;
        private final int recordBytes;
        private final long intervalMillis;
        private final String host;
        private transient Map<Integer, ByteBuffer> payloads;
        private transient KvBytesServer server;

        Sender(Transport transport, List<Integer> promptLens, int repeats, int bytesPerToken, int recordBytes,
               long intervalMillis, String host) {
            this.transport = transport;
            this.promptLens = List.copyOf(promptLens);
            this.repeats = repeats;
            this.bytesPerToken = bytesPerToken;
            this.recordBytes = recordBytes;
            this.intervalMillis = intervalMillis;
            this.host = host;
        }

        @Override
        public void processElement(Long i, Context ctx, Collector<KvHandoff> out) throws Exception {
            if (payloads == null) {
                payloads = new HashMap<>();
                server = KvBytesServer.start(host, Long.MAX_VALUE);
            }
            int tokens = promptLens.get((int) (i / repeats));
            ByteBuffer kv = payloads.computeIfAbsent(tokens, t -> random((long) t * bytesPerToken));
            Thread.sleep(intervalMillis); // pacing: one hand-off at a time, as a prompt's prefill would space them
            long sentMicros = nowMicros();
            ByteBuffer state = transport == Transport.RECORDS ? kv.duplicate() : ticket(server.offer(kv.duplicate()));
            String id = tokens + "-" + i + "-" + sentMicros + "-";
            PrefillHandoff h = new PrefillHandoff(id, new int[0], new int[] {0}, Map.of(KV, state));
            GenerateRequest request = GenerateRequest.newBuilder().setRequestId(id).build();
            List<KvHandoff> records = HandoffRecords.split(h, request, recordBytes, System.currentTimeMillis());
            // the sender's own part: offering or cutting into records, before any is sent
            String timed = id + (nowMicros() - sentMicros);
            records.forEach(r -> {
                r.setRequestId(timed);
                out.collect(r);
            });
        }

        private static ByteBuffer ticket(KvBytesTicket t) {
            return t.put(ByteBuffer.allocate(t.size()).order(ByteOrder.LITTLE_ENDIAN)).flip();
        }

        private static ByteBuffer random(long size) {
            byte[] b = new byte[Math.toIntExact(size)];
            new Random(size).nextBytes(b);
            return ByteBuffer.wrap(b);
        }

        /** The source ended: waits (up to a minute) until the receiver took every offer, then stops the server. */
        @Override
        public void close() throws Exception {
            if (server != null) {
                for (int i = 0; i < 600 && server.held() > 0; i++) {
                    Thread.sleep(100); // polling the receiver's progress, which nothing signals to this task
                }
                server.close();
            }
        }
    }

    /**
     * Joins a hand-off's records, or pulls its ticket's bytes; emits "prompt-tokens latency-micros offer-micros
     * pull-micros memcpy-GB/s pulled/failed": the sender's offer (or cut), the receiver's pull (or join), a copy of
     * the bytes just received, as a yardstick for how much memory bandwidth the host had then, and this process's pull
     * counts so far.
     */
    private static final class Receiver extends KeyedProcessFunction<String, KvHandoff, String> {
        private final Transport transport;
        private transient Map<String, Map<Integer, KvHandoff>> parts;
        private transient byte[] copy;

        Receiver(Transport transport) {
            this.transport = transport;
        }

        @Override
        public void processElement(KvHandoff record, Context ctx, Collector<String> out) throws Exception {
            if (parts == null) {
                parts = new HashMap<>();
            }
            String id = record.getRequestId().toString();
            Map<Integer, KvHandoff> got = parts.computeIfAbsent(id, k -> new HashMap<>());
            got.put(record.getPart(), record);
            if (got.size() < record.getParts()) {
                return;
            }
            parts.remove(id);
            long receivedMicros = nowMicros();
            ByteBuffer state = HandoffRecords.assemble(got).states().get(KV);
            if (transport == Transport.TICKET) {
                try {
                    state = KvBytesServer.pull(KvBytesTicket.get(state.order(ByteOrder.LITTLE_ENDIAN)));
                } catch (KvBytesGone e) {
                    throw new UncheckedIOException(new IOException(e));
                }
            }
            String[] f = id.split("-");
            long now = nowMicros();
            KvBytesServer.PullCounts pulls = KvBytesServer.pullCounts();
            out.collect(f[0] + " " + (now - Long.parseLong(f[2])) + " " + f[3] + " " + (now - receivedMicros) + " "
                    + memcpyGbPerSecond(state) + " " + pulls.pulled() + "/" + pulls.failed());
        }

        /** A copy of (up to) 128 MiB of the bytes received, in GB/s: what this process's memory gives right now. */
        private double memcpyGbPerSecond(ByteBuffer state) {
            if (copy == null) {
                copy = new byte[128 << 20];
            }
            int n = Math.min(copy.length, state.remaining());
            long t0 = System.nanoTime();
            state.duplicate().get(copy, 0, n);
            return n / (double) (System.nanoTime() - t0);
        }
    }

    private static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000 + now.getNano() / 1_000;
    }
}
