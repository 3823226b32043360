package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.StreamCounters;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.LlamaEngine;
import org.mstar.model.Architecture;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.RopeScaling;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;

/**
 * Engine throughput, a first serving number: the bf16 engine on random weights of Llama-3-8B's geometry
 * (hidden 4096, intermediate 14336, 32/8 heads of 128, vocab 128256), generated straight on the device, at
 * a few layer counts so that the per-layer and fixed (embedding, LM head, sampling, host) parts of a step
 * separate and extrapolate to 32 layers. Per batch size: {@value #PROMPT}-token random prompts submitted
 * together and prefilled under a {@value #TOKEN_BUDGET}-token budget, then {@value #DECODE_STEPS} steps in
 * which every request decodes. Times are wall clock around {@code step()}, which returns only after the
 * sampled tokens are on the host. Each model is served twice: eagerly, then with decode steps replayed as
 * CUDA graphs per batch bucket ({@link EngineOptions#decodeGraphs()}).
 */
final class EngineBench {
    static final int PROMPT = 512;
    static final int TOKEN_BUDGET = 8192;
    static final int DECODE_STEPS = 32;
    private static final int WARMUP_STEPS = 2;
    /** Room for the decode steps after the last prompt's first token, plus tokens drawn during prefill. */
    private static final int MAX_TOKENS = 96;
    /** Decode steps run under the {@link HostSampler} after the timed ones (the sampler perturbs timing). */
    private static final int PROFILED_STEPS = 24;
    private static final int PAGE = 16;

    /**
     * One batch size on one model.
     *
     * @param streamedBytes weight bytes a decode step reads (all but the embedding table, of which it
     *                      gathers only the batch's rows)
     * @param kvBytes K and V bytes the decode step's attention reads, at the mean context of the timed steps
     */
    record Row(int layers, int batch, boolean graphs, int prefillSteps, double prefillMillis,
               double decodeMillisPerStep, long streamedBytes, long kvBytes, StreamCounters.Snapshot decodeCalls,
               String hostProfile) {
        double prefillTokensPerSecond() {
            return batch * (double) PROMPT / (prefillMillis / 1e3);
        }

        double decodeTokensPerSecond() {
            return batch / (decodeMillisPerStep / 1e3);
        }

        double boundMillis(double peakTbPerS) {
            return streamedBytes / (peakTbPerS * 1e12) * 1e3;
        }
    }

    private final Device device;
    private final long seed;
    /** Numbers the runs, so request ids stay unique. */
    private int runs;

    EngineBench(Device device, long seed) {
        this.device = device;
        this.seed = seed;
    }

    /** Llama-3-8B's geometry (the layer count is {@link #run}'s to choose). */
    static ModelConfig llama3_8b() {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(4096).intermediateSize(14336).numLayers(32).numHeads(32).numKvHeads(8).headDim(128)
                .rmsNormEps(1e-5).ropeTheta(500_000).ropeScaling(RopeScaling.llama3(8.0, 1.0, 4.0, 8192))
                .maxPositionEmbeddings(131_072).vocabSize(128_256).bosTokenId(128_000).eosTokenId(128_001)
                .dtype(DType.BF16).build();
    }

    /**
     * Every batch size on a model of {@code geometry} with each layer count. Each batch runs twice and the
     * second run is reported: the first meets the step shapes of that batch for the first time (kernel
     * loading, cuBLAS heuristics, new allocator size classes).
     */
    List<Row> run(ModelConfig geometry, int[] layerCounts, int[] batches) {
        int maxBatch = Arrays.stream(batches).max().orElseThrow();
        List<Row> rows = new ArrayList<>();
        for (int layers : layerCounts) {
            ModelConfig config = geometry.toBuilder().numLayers(layers).build();
            long start = System.nanoTime();
            LlamaWeights weights = RandomWeights.create(config, device, DType.BF16, seed);
            double generateSeconds = (System.nanoTime() - start) / 1e9;
            System.out.printf(Locale.ROOT, "engine bench: %d layers, %.1f GB of random weights in %.1f s%n", layers,
                    weights.byteSize() / 1e9, generateSeconds);
            long streamed = weights.byteSize() - weights.embedding().byteSize();
            int pages = maxBatch * ((PROMPT + MAX_TOKENS + PAGE - 1) / PAGE) + PAGE;
            EngineOptions options = new EngineOptions(maxBatch, TOKEN_BUDGET,
                    KvCacheOptions.builder().maxSeqLen(PROMPT + MAX_TOKENS).maxNumPages(pages).pageSize(PAGE)
                            .prefixCache(false).build());
            try (LlamaModel model = new LlamaModel(weights, DType.BF16, "random:" + seed)) {
                for (boolean graphs : new boolean[] {false, true}) {
                    try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config),
                            options.withDecodeGraphs(graphs), DType.BF16)) {
                        for (int b : batches) {
                            measure(engine, config, b, layers, streamed, graphs);
                            Row row = measure(engine, config, b, layers, streamed, graphs);
                            System.out.printf(Locale.ROOT, "engine bench: %d layers, batch %d, graphs %s: prefill %.0f "
                                    + "tok/s, decode %.2f ms/step%n", layers, b, graphs, row.prefillTokensPerSecond(),
                                    row.decodeMillisPerStep());
                            rows.add(row);
                        }
                    }
                }
            }
        }
        return rows;
    }

    private Row measure(LlamaEngine engine, ModelConfig config, int batch, int layers, long streamed, boolean graphs) {
        Random rnd = new Random(seed + batch);
        runs++;
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            String id = "run" + runs + "-" + i;
            ids.add(id);
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config, PROMPT), MAX_TOKENS));
        }
        // prefill: until every request has its first token
        Set<String> started = new HashSet<>();
        int prefillSteps = 0;
        long start = System.nanoTime();
        while (started.size() < batch) {
            BenchRequests.step(engine).tokens().forEach(t -> started.add(t.requestId()));
            prefillSteps++;
        }
        double prefillMillis = (System.nanoTime() - start) / 1e6;
        for (int i = 0; i < WARMUP_STEPS; i++) {
            BenchRequests.step(engine);
        }
        StreamCounters.Snapshot before = calls();
        start = System.nanoTime();
        for (int i = 0; i < DECODE_STEPS; i++) {
            int produced = BenchRequests.step(engine).tokens().size();
            if (produced != batch) {
                throw new IllegalStateException("decode step " + i + " produced " + produced + " tokens for a batch of "
                        + batch);
            }
        }
        double decodeMillis = (System.nanoTime() - start) / 1e6 / DECODE_STEPS;
        StreamCounters.Snapshot decodeCalls = before == null ? null : calls().minus(before);
        String hostProfile;
        try (HostSampler sampler = new HostSampler(Thread.currentThread(), 500)) {
            for (int i = 0; i < PROFILED_STEPS; i++) {
                BenchRequests.step(engine);
            }
            sampler.close();
            hostProfile = sampler.table(25);
        }
        ids.forEach(engine::remove);
        long meanContext = PROMPT + 1 + WARMUP_STEPS + DECODE_STEPS / 2;
        long kvBytes = (long) batch * meanContext * config.numLayers() * 2L * config.kvSize() * DType.BF16.bytes();
        return new Row(layers, batch, graphs, prefillSteps, prefillMillis, decodeMillis, streamed, kvBytes, decodeCalls,
                hostProfile);
    }

    /** The CUDA stream's counters now; null on other devices. */
    private StreamCounters.Snapshot calls() {
        return device instanceof CudaDevice cuda ? cuda.stream().counters().snapshot() : null;
    }

    static String table(List<Row> rows, double peakTbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append("| layers | batch | decode graphs | prefill steps | prefill ms | prefill tok/s | decode ms/step "
                + "| decode tok/s | weights read GB | bound ms (weights / ").append(peakTbPerS)
                .append(" TB/s) | of bound | KV read MB |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %s | %d | %.1f | %.0f | %.2f | %.0f | %.2f | %.2f | %.0f%% | %.0f |%n",
                    r.layers, r.batch, r.graphs ? "on" : "off", r.prefillSteps, r.prefillMillis, r.prefillTokensPerSecond(),
                    r.decodeMillisPerStep, r.decodeTokensPerSecond(), r.streamedBytes / 1e9, r.boundMillis(peakTbPerS),
                    100 * r.boundMillis(peakTbPerS) / r.decodeMillisPerStep, r.kvBytes / 1e6));
        }
        return sb.toString();
    }

    /**
     * Where a decode step's wall time goes, per step over the timed steps: time the host sat blocked in
     * stream synchronisations (waiting for the GPU) against the rest (host work the GPU may wait on), and
     * the calls the step made. Rows without counters (not CUDA) are left out.
     */
    static String callTable(List<Row> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("| layers | batch | decode graphs | decode ms/step | host blocked in syncs ms | host not blocked ms "
                + "| syncs | uploads | upload KB | kernel launches | GEMMs | driver allocs |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            StreamCounters.Snapshot c = r.decodeCalls;
            if (c == null) {
                continue;
            }
            double blocked = c.syncNanos() / 1e6 / DECODE_STEPS;
            sb.append(String.format(Locale.ROOT, "| %d | %d | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |%n",
                    r.layers, r.batch, r.graphs ? "on" : "off", r.decodeMillisPerStep, blocked, r.decodeMillisPerStep - blocked,
                    c.syncs() / (double) DECODE_STEPS, c.uploads() / (double) DECODE_STEPS,
                    c.uploadBytes() / 1024.0 / DECODE_STEPS, c.launches() / (double) DECODE_STEPS,
                    c.gemms() / (double) DECODE_STEPS, c.driverAllocs() / (double) DECODE_STEPS));
        }
        return sb.toString();
    }

    /** The host profile of each row's decode steps. */
    static String hostProfiles(List<Row> rows) {
        StringBuilder sb = new StringBuilder();
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "%nHost profile, %d layers, batch %d, decode graphs %s, %d decode steps: ",
                    r.layers, r.batch, r.graphs ? "on" : "off", PROFILED_STEPS)).append(r.hostProfile);
        }
        return sb.toString();
    }

    /**
     * Per batch, the straight line through the fewest and most layers measured: time per layer, the fixed
     * rest, and both carried to {@code target} layers (the model's weight bytes there give its bound).
     */
    static String extrapolation(List<Row> rows, int target, double peakTbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append("| batch | decode ms/layer | decode fixed ms | ").append(target).append("-layer decode ms/step | ")
                .append(target).append("-layer decode tok/s | ").append(target).append("-layer bound ms | prefill ms/layer | ")
                .append("prefill fixed ms | ").append(target).append("-layer prefill tok/s |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|\n");
        for (int b : rows.stream().mapToInt(Row::batch).distinct().toArray()) {
            List<Row> at = rows.stream().filter(r -> r.batch == b && !r.graphs).toList();
            Row lo = at.stream().min(Comparator.comparingInt(Row::layers)).orElseThrow();
            Row hi = at.stream().max(Comparator.comparingInt(Row::layers)).orElseThrow();
            if (lo.layers == hi.layers) {
                continue;
            }
            double span = hi.layers - lo.layers;
            double decodeLayer = (hi.decodeMillisPerStep - lo.decodeMillisPerStep) / span;
            double decodeFixed = lo.decodeMillisPerStep - lo.layers * decodeLayer;
            double prefillLayer = (hi.prefillMillis - lo.prefillMillis) / span;
            double prefillFixed = lo.prefillMillis - lo.layers * prefillLayer;
            double decodeTarget = decodeFixed + target * decodeLayer;
            double prefillTarget = prefillFixed + target * prefillLayer;
            double bytesPerLayer = (hi.streamedBytes - lo.streamedBytes) / span;
            double boundTarget = (lo.streamedBytes + (target - lo.layers) * bytesPerLayer) / (peakTbPerS * 1e12) * 1e3;
            sb.append(String.format(Locale.ROOT, "| %d | %.3f | %.2f | %.2f | %.0f | %.2f | %.2f | %.1f | %.0f |%n", b,
                    decodeLayer, decodeFixed, decodeTarget, b / (decodeTarget / 1e3), boundTarget, prefillLayer,
                    prefillFixed, b * (double) PROMPT / (prefillTarget / 1e3)));
        }
        return sb.toString();
    }
}
