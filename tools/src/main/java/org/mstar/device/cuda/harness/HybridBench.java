package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.OptionalInt;
import java.util.Random;
import java.util.Set;
import java.util.function.BiConsumer;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.Tensor;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.HybridEngine;
import org.mstar.model.GenerationConfig;
import org.mstar.model.HybridConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.HybridModel;
import org.mstar.model.mamba.HybridWeights;
import org.mstar.model.mamba.StateSnapshots;

/**
 * The bf16 Bamba engine on random weights of Bamba-9B's geometry, decode and prefill.
 * Decode: per case {@code batch} random prompts of {@value #CONTEXT} tokens, prefilled, {@value #WARMUP_STEPS} decode
 * steps (the first records the bucket's graph), then {@value #DECODE_STEPS} timed steps in which every request
 * decodes, wall clock around {@code step()}; against the bound of reading every streamed weight (all but the
 * embedding table), reading and writing each request's fp32 states (SSM and conv, every Mamba2 layer) and reading the
 * batch's K/V of the attention layers once, at the copy bandwidth measured in the same call. Prefill: one prompt of
 * {@value #PREFILL_TOKENS} tokens in one step (the second of two runs), its FLOPs (the projections' 2·params·tokens,
 * the LM head's one row, the causal attention's scores and values) over the time, against the rate of the model's
 * largest GEMM (the MLP's gate/up at the prompt's rows) measured in the same call: the scan, the convolution, norms
 * and attention count as time, not as work.
 */
final class HybridBench {
    static final int BAMBA_9B_LAYERS = 32;
    static final int CONTEXT = 512;
    static final int PREFILL_TOKENS = 2048;
    static final int WARMUP_STEPS = 3;
    static final int DECODE_STEPS = 24;
    private static final int TOKEN_BUDGET = 8192;
    private static final int PAGE = 16;

    /** Bamba-9B (config.json of ibm-ai-platform/Bamba-9B): 32 layers, attention at 9, 18 and 27, the rest Mamba2. */
    static HybridConfig bamba9b(int layers) {
        Mamba2Shape mixer = new Mamba2Shape(128, 64, 1, 128, 4, 256, 0f, Float.POSITIVE_INFINITY);
        List<Integer> attention = List.of(9, 18, 27).stream().filter(l -> l < layers).toList();
        return new HybridConfig(HybridConfig.Family.BAMBA, 4096, layers, 128_256, 1e-5, false, OptionalInt.empty(),
                List.of(), mixer, true, attention, 32, 8, 64, 10_000, 14_336, 8192);
    }

    /** One decode case's time and the bytes of its bound. */
    record DecodeRow(int layers, int batch, double millisPerStep, long weightBytes, long stateBytes, long kvBytes) {
        double boundMillis(double terabytesPerSecond) {
            return (weightBytes + stateBytes + kvBytes) / (terabytesPerSecond * 1e12) * 1e3;
        }
    }

    record PrefillRow(int layers, int tokens, double millis, double teraflops) {
        double tflopsPerSecond() {
            return teraflops / (millis / 1e3);
        }
    }

    private final Device device;
    private final long seed;
    private int runs;

    HybridBench(Device device, long seed) {
        this.device = device;
        this.seed = seed;
    }

    /** Decode at each batch, then prefill, on one engine over random weights of {@code config}. */
    void run(HybridConfig config, int[] batches, List<DecodeRow> decode, List<PrefillRow> prefill) {
        int maxBatch = 1;
        for (int b : batches) {
            maxBatch = Math.max(maxBatch, b);
        }
        withEngine(config, maxBatch, (engine, streamed) -> {
            for (int b : batches) {
                DecodeRow row = decode(engine, config, b, streamed);
                System.out.printf(Locale.ROOT, "hybrid bench: %d layers, decode batch %d: %.2f ms/step%n",
                        config.numLayers(), b, row.millisPerStep());
                decode.add(row);
            }
            prefill(engine, config);
            PrefillRow row = prefill(engine, config);
            System.out.printf(Locale.ROOT, "hybrid bench: %d layers, prefill %d tokens: %.1f ms%n", config.numLayers(),
                    PREFILL_TOKENS, row.millis());
            prefill.add(row);
        });
    }

    /** Decode steps at {@code batch} alone (for a kernel profiler: the run's last step is a decode step). */
    DecodeRow decodeOnly(HybridConfig config, int batch) {
        DecodeRow[] row = new DecodeRow[1];
        withEngine(config, batch, (engine, streamed) -> row[0] = decode(engine, config, batch, streamed));
        return row[0];
    }

    /** Runs {@code body} with a decode-graph engine for up to {@code maxBatch} rows and the weights' streamed bytes. */
    private void withEngine(HybridConfig config, int maxBatch, BiConsumer<HybridEngine, Long> body) {
        int maxSeqLen = Math.max(CONTEXT + 64 + WARMUP_STEPS + DECODE_STEPS, PREFILL_TOKENS + 2);
        int pages = maxBatch * ((CONTEXT + 64 + WARMUP_STEPS + DECODE_STEPS + PAGE - 1) / PAGE)
                + (PREFILL_TOKENS + PAGE) / PAGE + PAGE;
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(PAGE)
                .prefixCache(false).build();
        EngineOptions options = new EngineOptions(maxBatch, TOKEN_BUDGET, kv, true);
        try (HybridWeights weights = HybridWeights.random(config, device, DType.BF16, seed);
             HybridEngine engine = new HybridEngine(new HybridModel(weights, DType.BF16, "random:" + seed,
                     options.maxBatchRows(), StateSnapshots.defaults(options.maxBatchRows())), null,
                     new GenerationConfig(OptionalInt.empty(), List.of()), options, DType.BF16)) {
            long streamed = weights.hfTensors().values().stream().mapToLong(Tensor::byteSize).sum()
                    - weights.embedding().byteSize();
            body.accept(engine, streamed);
        }
    }

    private DecodeRow decode(HybridEngine engine, HybridConfig config, int batch, long streamed) {
        Random rnd = new Random(seed + batch);
        runs++;
        List<String> ids = new ArrayList<>();
        int maxTokens = WARMUP_STEPS + DECODE_STEPS + 64;
        for (int i = 0; i < batch; i++) {
            String id = "hybrid" + runs + "-" + i;
            ids.add(id);
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config.vocabSize(), CONTEXT),
                    maxTokens));
        }
        Set<String> started = new HashSet<>();
        long prefillTokens = 0;
        while (started.size() < batch) {
            List<String> drawn = BenchRequests.step(engine).tokens().stream().map(t -> t.requestId()).toList();
            started.addAll(drawn);
            prefillTokens += drawn.size();
        }
        for (int i = 0; i < WARMUP_STEPS; i++) {
            BenchRequests.step(engine);
        }
        long start = System.nanoTime();
        for (int i = 0; i < DECODE_STEPS; i++) {
            int produced = BenchRequests.step(engine).tokens().size();
            if (produced != batch) {
                throw new IllegalStateException("decode step " + i + " produced " + produced + " tokens for a batch of "
                        + batch);
            }
        }
        double millis = (System.nanoTime() - start) / 1e6 / DECODE_STEPS;
        ids.forEach(engine::remove);
        Mamba2Shape s = config.mixer();
        long statePerRow = (long) config.mambaLayers().size()
                * ((long) s.heads() * s.headDim() * s.stateDim() + (long) s.convDim() * (s.convKernel() - 1)) * 4;
        double meanContext = CONTEXT + (double) prefillTokens / batch + WARMUP_STEPS + (DECODE_STEPS - 1) / 2.0;
        long kvBytes = (long) (batch * meanContext * config.attentionLayers().size() * 2L * config.kvHeads()
                * config.attentionHeadDim() * DType.BF16.bytes());
        return new DecodeRow(config.numLayers(), batch, millis, streamed, 2 * batch * statePerRow, kvBytes);
    }

    private PrefillRow prefill(HybridEngine engine, HybridConfig config) {
        Random rnd = new Random(seed + PREFILL_TOKENS);
        runs++;
        String id = "hybrid-prefill" + runs;
        engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config.vocabSize(), PREFILL_TOKENS), 2));
        long start = System.nanoTime();
        while (BenchRequests.step(engine).tokens().isEmpty()) {
            // a prompt over the step budget takes several steps; its first token ends the prefill
        }
        double millis = (System.nanoTime() - start) / 1e6;
        engine.remove(id);
        return new PrefillRow(config.numLayers(), PREFILL_TOKENS, millis, prefillFlops(config, PREFILL_TOKENS) / 1e12);
    }

    /** The prefill's matmul work: projections at every token, the LM head at the last, causal attention. */
    static double prefillFlops(HybridConfig config, int tokens) {
        Mamba2Shape s = config.mixer();
        long hidden = config.hiddenSize();
        long attentionWidth = (long) config.attentionHeads() * config.attentionHeadDim();
        long kvWidth = (long) config.kvHeads() * config.attentionHeadDim();
        long params = 0;
        for (int l = 0; l < config.numLayers(); l++) {
            params += config.isAttention(l) ? hidden * (attentionWidth + 2 * kvWidth) + attentionWidth * hidden
                    : hidden * s.projWidth() + (long) s.inner() * hidden;
            params += 3 * hidden * config.intermediateSize();
        }
        double attention = config.attentionLayers().size() * 4.0 * attentionWidth * ((double) tokens * (tokens + 1) / 2);
        return 2.0 * params * tokens + 2.0 * hidden * config.vocabSize() + attention;
    }

    static String decodeTable(List<DecodeRow> rows, double terabytesPerSecond) {
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "| layers | batch | context | ms/step | tok/s "
                + "| weights GB | states GB (read + write) | KV GB | bound ms (%.2f TB/s) | of bound |%n",
                terabytesPerSecond));
        sb.append("|---|---|---|---|---|---|---|---|---|---|\n");
        for (DecodeRow r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %d | %.2f | %.0f | %.2f | %.2f | %.3f | %.2f | %.0f%% |%n",
                    r.layers, r.batch, CONTEXT, r.millisPerStep, r.batch / (r.millisPerStep / 1e3), r.weightBytes / 1e9,
                    r.stateBytes / 1e9, r.kvBytes / 1e9, r.boundMillis(terabytesPerSecond),
                    100 * r.boundMillis(terabytesPerSecond) / r.millisPerStep));
        }
        return sb.toString();
    }

    static String prefillTable(List<PrefillRow> rows, double gemmTflops) {
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "| layers | prompt tokens | ms | tok/s | TFLOP "
                + "| TFLOP/s | of the GEMM rate (%.0f TFLOP/s) |%n", gemmTflops));
        sb.append("|---|---|---|---|---|---|---|\n");
        for (PrefillRow r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %.1f | %.0f | %.1f | %.0f | %.0f%% |%n", r.layers, r.tokens,
                    r.millis, r.tokens / (r.millis / 1e3), r.teraflops, r.tflopsPerSecond(),
                    100 * r.tflopsPerSecond() / gemmTflops));
        }
        return sb.toString();
    }
}
