package org.mstar.bench.flink;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.storage.FileSystemCheckpointStorage;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.apache.flink.util.FileUtils;
import org.mstar.engine.EngineStats;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.GenerateOperator;
import org.mstar.flink.GenerateOperatorFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/**
 * What checkpoints cost the {@link GenerateOperator} while many long generations are live: {@code requests} requests
 * each generate {@code tokens} tokens, one per step, with a checkpoint every {@code every} steps, on RocksDB with
 * incremental checkpoints to a local folder. No model runs (each step hands every live request one token), so what
 * is timed is the operator's mirror writes before the barrier plus the state backend's snapshot. Prints, per
 * checkpoint, the tokens per request so far, the bytes the checkpoint added (its incremental size), the time the
 * operator took to write its mirrors before the barrier, and that plus the snapshot.
 *
 * <pre>java -cp tools/target/benchmarks.jar org.mstar.bench.flink.MirrorCheckpointBench [requests] [tokens] [every]</pre>
 */
public final class MirrorCheckpointBench {
    private MirrorCheckpointBench() {}

    public static void main(String[] args) throws Exception {
        int requests = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int tokens = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        int every = args.length > 2 ? Integer.parseInt(args[2]) : 100;
        Path dir = Files.createTempDirectory("mstar-mirror-bench-");
        System.out.printf(Locale.ROOT, "%d live requests, %d tokens each, a checkpoint every %d tokens%n",
                requests, tokens, every);
        System.out.printf(Locale.ROOT, "%10s %16s %14s %14s%n", "tokens/req", "checkpoint KiB", "mirrors ms", "total ms");
        try (var harness = harness(dir, requests + 1)) {
            harness.open();
            for (int i = 0; i < requests; i++) {
                harness.processElement(GenerateRequest.newBuilder().setRequestId(String.format("req-%05d", i))
                        .setPromptTokenIds(List.of(1, 2, 3, 4, 5, 6, 7, 8)).setMaxTokens(tokens).setIgnoreEos(true)
                        .build(), 0);
            }
            long time = 0;
            long totalBytes = 0;
            double totalMs = 0;
            for (int step = 1, checkpoint = 1; step <= tokens; step++) {
                harness.setProcessingTime(++time); // fires the pending step timer: one token for every request
                if (step % every == 0 && step < tokens) {
                    long t0 = System.nanoTime();
                    harness.prepareSnapshotPreBarrier(checkpoint);
                    long t1 = System.nanoTime();
                    OperatorSubtaskState state = harness.snapshot(checkpoint, time);
                    long t2 = System.nanoTime();
                    harness.notifyOfCompletedCheckpoint(checkpoint);
                    long bytes = 0;
                    for (KeyedStateHandle h : state.getManagedKeyedState()) {
                        bytes += h.getCheckpointedSize();
                    }
                    totalBytes += bytes;
                    totalMs += (t2 - t0) / 1e6;
                    System.out.printf(Locale.ROOT, "%10d %16.1f %14.1f %14.1f%n", step, bytes / 1024.0,
                            (t1 - t0) / 1e6, (t2 - t0) / 1e6);
                    checkpoint++;
                }
            }
            System.out.printf(Locale.ROOT, "all checkpoints: %.1f MiB, %.0f ms%n", totalBytes / 1048576.0, totalMs);
        } finally {
            FileUtils.deleteDirectory(dir.toFile());
        }
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness(Path dir,
            int maxWaiting) throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MAX_WAITING, maxWaiting);
        var factory = GenerateOperatorFactory.of(new TokenPerStepEngine.Factory(), conf);
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(factory, GenerateRequest::getRequestId,
                Types.STRING, 128, 1, 0);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend(true));
        harness.setCheckpointStorage(new FileSystemCheckpointStorage(dir.toUri()));
        return harness;
    }

    /** Gives every live request one token per step, until its max_tokens; costs no model time. */
    static final class TokenPerStepEngine implements GenerationEngine {
        private final Map<String, int[]> live = new LinkedHashMap<>(); // id -> {next index, max tokens}

        static final class Factory implements EngineFactory {
            private static final long serialVersionUID = 1L;

            @Override
            public GenerationEngine create(String device, int subtaskIndex) {
                return new TokenPerStepEngine();
            }
        }

        @Override
        public void submit(GenerationRequest request) {
            resume(request, new int[0]);
        }

        @Override
        public void resume(GenerationRequest request, int[] generated) {
            live.putIfAbsent(request.requestId(), new int[] {generated.length, request.maxTokens()});
        }

        @Override
        public StepResult step() {
            List<TokenOutput> out = new ArrayList<>(live.size());
            for (var it = live.entrySet().iterator(); it.hasNext(); ) {
                var e = it.next();
                int index = e.getValue()[0]++;
                out.add(new TokenOutput(e.getKey(), index, 100 + index % 30_000, " x", null));
                if (e.getValue()[0] >= e.getValue()[1]) {
                    it.remove();
                }
            }
            return new StepResult(out, List.of(), List.of());
        }

        @Override
        public boolean hasWork() {
            return !live.isEmpty();
        }

        @Override
        public void remove(String requestId) {
            live.remove(requestId);
        }

        @Override
        public int waiting() {
            return 0;
        }

        @Override
        public EngineStats stats() {
            return new EngineStats(live.size(), 0, 0, 0, 0, 0, 0, 0);
        }

        @Override
        public void close() {}
    }
}
