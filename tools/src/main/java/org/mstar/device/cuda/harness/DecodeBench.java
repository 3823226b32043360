package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import java.util.function.IntFunction;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.KernelOptions;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.LlamaEngine;
import org.mstar.model.Architecture;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.model.RopeScaling;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;

/**
 * Engine decode throughput against the bound of reading every weight and the batch's K/V once per step: the
 * bf16 engine on random weights made on the device, per case {@code batch} random prompts of {@code context}
 * tokens, prefilled under a {@value #TOKEN_BUDGET}-token budget, {@value #WARMUP_STEPS} decode steps (the
 * first of a batch bucket records its graph), then {@value #DECODE_STEPS} timed steps in which every request
 * decodes. Times are wall clock around {@code step()}, which returns once the sampled tokens are on the host.
 * One engine per geometry and graph setting, its KV pool sized for the largest case. With decode graphs, the
 * device memory a bucket's graph keeps (its logits and the forward's temporaries) and the growth of the
 * device's memory in use across the steps that recorded it are reported for the first case of each bucket.
 */
final class DecodeBench {
    static final int TOKEN_BUDGET = 8192;
    static final int WARMUP_STEPS = 3;
    static final int DECODE_STEPS = 24;
    private static final int PAGE = 16;

    /**
     * One measured shape: {@code batch} requests decoding at {@code context} tokens, graphs on or off, matmuls of
     * up to {@code skinnyRows} rows on the skinny-matmul kernel (0: all on cuBLAS; -1: the device's setting), the
     * graphs' kernels launched programmatically or in plain stream order.
     */
    record Case(int batch, int context, boolean graphs, int skinnyRows, boolean programmatic) {
        Case(int batch, int context, boolean graphs) {
            this(batch, context, graphs, -1, true);
        }

        Case(int batch, int context, boolean graphs, int skinnyRows) {
            this(batch, context, graphs, skinnyRows, true);
        }

        /** Tokens each request may generate: through the warm-up and timed steps after its prefill. */
        int maxTokens() {
            return BenchRequests.decodeAllowance(batch, context, TOKEN_BUDGET, WARMUP_STEPS + DECODE_STEPS);
        }

        /** The table's settings cell; the PyTorch comparison reads back the rows whose cell is on or off. */
        String settings() {
            String matmul = skinnyRows < 0 ? "" : skinnyRows == 0 ? ", cuBLAS only"
                    : ", skinny matmul up to " + skinnyRows + " rows";
            return (graphs ? "on" : "off") + matmul + (graphs && !programmatic ? ", plain launch" : "");
        }
    }

    /**
     * @param weightBytes weight bytes a decode step reads (all but an untied embedding table, of which it
     *                    gathers only the batch's rows)
     * @param kvBytes K and V bytes the batch's attention reads per step, at the mean context of the timed steps
     * @param graphBytes device bytes the bucket's graph keeps; -1 when the bucket was recorded by an earlier
     *                   case or graphs are off
     * @param memoryGrowth growth of the device memory in use over the warm-up steps (-1 when not measured)
     */
    record Row(String model, Case c, double millisPerStep, long weightBytes, long kvBytes, long graphBytes,
               long memoryGrowth) {
        double tokensPerSecond() {
            return c.batch / (millisPerStep / 1e3);
        }

        double boundMillis(double terabytesPerSecond) {
            return (weightBytes + kvBytes) / (terabytesPerSecond * 1e12) * 1e3;
        }
    }

    private final Device device;
    private final long seed;
    private final int timedSteps;
    private final WeightQuantization quantization;
    private int runs;

    DecodeBench(Device device, long seed) {
        this(device, seed, DECODE_STEPS);
    }

    /** With {@code timedSteps} (at most {@value #DECODE_STEPS}) instead: few, for a run under a kernel profiler. */
    DecodeBench(Device device, long seed, int timedSteps) {
        this(device, seed, timedSteps, WeightQuantization.NONE);
    }

    /** With the projections' weights kept as {@code quantization} says (FP8: quantised at load, one scale a row). */
    DecodeBench(Device device, long seed, int timedSteps, WeightQuantization quantization) {
        if (timedSteps < 1 || timedSteps > DECODE_STEPS) {
            throw new IllegalArgumentException("timed steps must be 1.." + DECODE_STEPS + ", got " + timedSteps);
        }
        this.device = device;
        this.seed = seed;
        this.timedSteps = timedSteps;
        this.quantization = quantization;
    }

    /** Llama-3.2-1B's geometry: 16 layers, hidden 2048, 32/8 heads of 64, tied embeddings. */
    static ModelConfig llama32_1b() {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(2048).intermediateSize(8192).numLayers(16).numHeads(32).numKvHeads(8).headDim(64)
                .rmsNormEps(1e-5).ropeTheta(500_000).ropeScaling(RopeScaling.llama3(32.0, 1.0, 4.0, 8192))
                .maxPositionEmbeddings(131_072).vocabSize(128_256).bosTokenId(128_000).eosTokenId(128_001)
                .tieWordEmbeddings(true).dtype(DType.BF16).build();
    }

    /** Every case on random weights of {@code config}, named {@code model} in the rows. */
    List<Row> run(String name, ModelConfig config, List<Case> cases) {
        int maxBatch = cases.stream().mapToInt(Case::batch).max().orElseThrow();
        int maxSeqLen = cases.stream().mapToInt(c -> c.context + c.maxTokens()).max().orElseThrow();
        int pages = cases.stream().mapToInt(c -> c.batch * ((c.context + c.maxTokens() + PAGE - 1) / PAGE)).max()
                .orElseThrow() + PAGE;
        EngineOptions options = new EngineOptions(maxBatch, TOKEN_BUDGET,
                KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(PAGE).prefixCache(false)
                        .build());
        List<Row> rows = new ArrayList<>();
        try (LlamaWeights weights = RandomWeights.create(config, device, DType.BF16, seed, quantization)) {
            long streamed = weights.byteSize() - (weights.tiedEmbeddings() ? 0 : weights.embedding().byteSize());
            // one engine per setting (a decode graph keeps the kernels it was recorded with)
            List<Case> settings = cases.stream().map(c -> new Case(0, 0, c.graphs, c.skinnyRows, c.programmatic))
                    .distinct().toList();
            for (Case setting : settings) {
                List<Case> withSetting = cases.stream().filter(c -> c.graphs == setting.graphs
                        && c.skinnyRows == setting.skinnyRows && c.programmatic == setting.programmatic).toList();
                // a model per setting over the same weights (not closed: that would close the weights)
                LlamaModel model = new LlamaModel(weights, deviceFor(setting), DType.BF16, "random:" + seed);
                try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config),
                        options.withDecodeGraphs(setting.graphs), DType.BF16)) {
                    for (Case c : withSetting) {
                        Row row = measure(engine, name, config, c, streamed);
                        System.out.printf(Locale.ROOT, "decode bench: %s, batch %d, context %d, graphs %s: %.2f ms/step%n",
                                name, c.batch, c.context, c.settings(), row.millisPerStep);
                        rows.add(row);
                    }
                }
            }
        }
        return rows;
    }

    private Row measure(LlamaEngine engine, String name, ModelConfig config, Case c, long streamed) {
        return measure(engine, name, config, c, streamed, i -> null);
    }

    /** One case on {@code engine}, request {@code i} of the batch with adapter {@code adapterOf.apply(i)} (null: none). */
    Row measure(LlamaEngine engine, String name, ModelConfig config, Case c, long streamed,
                IntFunction<String> adapterOf) {
        Random rnd = new Random(seed + c.batch * 31L + c.context);
        runs++;
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < c.batch; i++) {
            String id = "decode" + runs + "-" + i;
            ids.add(id);
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config, c.context), c.maxTokens(),
                    adapterOf.apply(i)));
        }
        Set<String> started = new HashSet<>();
        long prefillTokens = 0;
        while (started.size() < c.batch) {
            List<String> drawn = BenchRequests.step(engine).tokens().stream().map(t -> t.requestId()).toList();
            started.addAll(drawn);
            prefillTokens += drawn.size();
        }
        int bucket = Integer.highestOneBit(c.batch) == c.batch ? c.batch : Integer.highestOneBit(c.batch) << 1;
        boolean newBucket = c.graphs && !engine.decodeGraphBytes().containsKey(bucket);
        long before = memoryInUse();
        for (int i = 0; i < WARMUP_STEPS; i++) {
            BenchRequests.step(engine);
        }
        long growth = newBucket && before >= 0 ? memoryInUse() - before : -1;
        long start = System.nanoTime();
        for (int i = 0; i < timedSteps; i++) {
            int produced = BenchRequests.step(engine).tokens().size();
            if (produced != c.batch) {
                throw new IllegalStateException("decode step " + i + " produced " + produced + " tokens for a batch of "
                        + c.batch);
            }
        }
        double millis = (System.nanoTime() - start) / 1e6 / timedSteps;
        long graphBytes = newBucket ? engine.decodeGraphBytes().getOrDefault(bucket, -1L) : -1;
        ids.forEach(engine::remove);
        // keys a timed step attends per request: the prompt and every token drawn before the step (the newest is
        // appended and attended in it), averaged over the timed steps
        double meanContext = c.context + (double) prefillTokens / c.batch + WARMUP_STEPS + (timedSteps - 1) / 2.0;
        long kvBytes = (long) (c.batch * meanContext * ModelCost.kvBytesPerToken(config));
        return new Row(name, c, millis, streamed, kvBytes, graphBytes, growth);
    }

    /**
     * The device with a setting's variants: its skinny-matmul rows when they are ≥ 0 (else the device's) and whether
     * graphs launch programmatically.
     */
    private Device deviceFor(Case setting) {
        KernelOptions options = device.options().withProgrammaticLaunch(setting.programmatic);
        return device.withOptions(setting.skinnyRows < 0 ? options : options.withSkinnyMatmulRows(setting.skinnyRows));
    }

    private long memoryInUse() {
        return device instanceof CudaDevice cuda ? cuda.memoryInUse() : -1;
    }

    /**
     * The decode table; the bound is every weight and K/V byte read once at {@code terabytesPerSecond}. The
     * PyTorch peer (torch_decode.py) reads the rows back by model, batch, context and graphs.
     */
    static String table(List<Row> rows, double terabytesPerSecond) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "| model | batch | context | decode graphs | ms/step | tok/s | weights GB "
                + "| KV GB | bound ms (%.2f TB/s) | of bound | graph MB | memory growth MB |%n", terabytesPerSecond));
        sb.append("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %s | %.2f | %.0f | %.2f | %.2f | %.2f | %.0f%% | %s | %s |%n",
                    r.model, r.c.batch, r.c.context, r.c.settings(), r.millisPerStep, r.tokensPerSecond(),
                    r.weightBytes / 1e9, r.kvBytes / 1e9, r.boundMillis(terabytesPerSecond),
                    100 * r.boundMillis(terabytesPerSecond) / r.millisPerStep, megabytes(r.graphBytes),
                    megabytes(r.memoryGrowth)));
        }
        return sb.toString();
    }

    private static String megabytes(long bytes) {
        return bytes < 0 ? "-" : String.format(Locale.ROOT, "%.0f", bytes / 1e6);
    }
}
