package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.DeviceGroup;
import org.mstar.device.KernelOptions;
import org.mstar.device.MoeRouting;
import org.mstar.device.cuda.CudaContext;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.LlamaEngine;
import org.mstar.model.Architecture;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.model.MoeConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;
import org.mstar.model.llama.ShardLayout;
import org.mstar.model.llama.ShardedWeights;

/**
 * Tensor and expert parallelism on the GPUs of one host: the bf16 engine on random weights of a geometry at one
 * device and at {@code degree} devices (cuda:0 on), decode ms/step at batch 1 and 64 after {@value #PROMPT}-token
 * prompts, and prefill tokens/s of the batch's prompts, beside the bound of the bytes a decode step reads (weights
 * and KV) spread over the devices at the copy bandwidth of one. Both sides run eagerly (a tensor-parallel engine has
 * no decode graphs). The full weights are made on cuda:0 and split from there, so a geometry runs at the layer count
 * {@code layers} whose weights fit one GPU; the bound is for those layers. Refuses when fewer GPUs than the degree.
 */
final class ParallelBench {
    static final int PROMPT = 512;
    static final int DECODE_STEPS = 16;
    private static final int WARMUP_STEPS = 2;
    private static final int MAX_TOKENS = 48;
    private static final int PAGE = 16;
    private static final int TOKEN_BUDGET = 8192;
    static final int[] BATCHES = {1, 64};

    /** The geometries --parallel-perf names, each with the layer count it runs at by default. */
    enum Geometry {
        /** Llama-3.1-8B, all 32 layers. */
        LLAMA_8B("8B", 32),
        /** Llama-3.1-70B (hidden 8192, 64/8 heads, intermediate 28672), 16 of its 80 layers. */
        LLAMA_70B("70B", 16),
        /** Qwen3-30B-A3B (128 experts of width 768, top 8, 32/4 heads), 16 of its 48 layers. */
        QWEN3_MOE("moe", 16);

        final String flag;
        final int layers;

        Geometry(String flag, int layers) {
            this.flag = flag;
            this.layers = layers;
        }

        static Geometry of(String flag) {
            for (Geometry g : values()) {
                if (g.flag.equalsIgnoreCase(flag)) {
                    return g;
                }
            }
            throw new IllegalArgumentException("unknown --parallel-perf geometry '" + flag + "': 8B, 70B or moe");
        }

        ModelConfig config(int layerCount) {
            ModelConfig.Builder b = switch (this) {
                case LLAMA_8B -> EngineBench.llama3_8b().toBuilder();
                case LLAMA_70B -> EngineBench.llama3_8b().toBuilder().hiddenSize(8192).intermediateSize(28_672)
                        .numHeads(64).numKvHeads(8);
                case QWEN3_MOE -> ModelConfig.builder(Architecture.QWEN3_MOE).hiddenSize(2048).intermediateSize(6144)
                        .numHeads(32).numKvHeads(4).headDim(128).rmsNormEps(1e-6).ropeTheta(1_000_000)
                        .maxPositionEmbeddings(40_960).vocabSize(151_936).bosTokenId(151_643).eosTokenId(151_645)
                        .dtype(DType.BF16).moe(new MoeConfig(128, 768, MoeRouting.softmaxTopK(8, true),
                                Collections.nCopies(layerCount, true)));
            };
            return b.numLayers(layerCount).build();
        }
    }

    /** One degree at one batch: decode and prefill times, and the bytes a decode step reads over all devices. */
    record Row(String model, int layers, int degree, int batch, double decodeMillis, double prefillTokensPerSecond,
               double weightBytes, double kvBytes) {
        double boundMillis(double tbPerS) {
            return (weightBytes + kvBytes) / degree / (tbPerS * 1e12) * 1e3;
        }
    }

    /** The first device of each group ("cuda:0"; "cpu" in tests). */
    private final String devices;
    private final long seed;
    private final int prompt;
    private final int[] batches;
    private int runs;

    ParallelBench(long seed) {
        this("cuda:0", seed, PROMPT, BATCHES);
    }

    ParallelBench(String devices, long seed, int prompt, int[] batches) {
        this.devices = devices;
        this.seed = seed;
        this.prompt = prompt;
        this.batches = batches;
    }

    /** @throws IllegalArgumentException when this host has fewer GPUs than {@code degree} */
    static void requireDevices(int degree) {
        int gpus = CudaContext.deviceCount();
        if (gpus < degree) {
            throw new IllegalArgumentException("--parallel-perf at tensor parallel " + degree + " needs " + degree
                    + " GPUs; this host has " + gpus);
        }
    }

    /** One GPU, then {@code degree} GPUs, each at batch 1 and 64. */
    List<Row> run(Geometry geometry, int layers, int degree) {
        requireDevices(degree);
        return run(geometry.flag, geometry.config(layers), degree);
    }

    /** One device, then {@code degree} devices, at each batch. */
    List<Row> run(String name, ModelConfig config, int degree) {
        ShardLayout.of(config, degree); // refuses an indivisible degree before a byte is allocated
        DType dtype = devices.startsWith("cuda") ? DType.BF16 : DType.F32;
        int maxBatch = Arrays.stream(batches).max().orElseThrow();
        List<Row> rows = new ArrayList<>();
        for (int d : new int[] {1, degree}) {
            try (DeviceGroup group = DeviceGroup.open(devices, d, KernelOptions.defaults());
                 LlamaModel model = model(config, group, dtype)) {
                int pages = maxBatch * ((prompt + MAX_TOKENS + PAGE - 1) / PAGE) + PAGE;
                EngineOptions options = new EngineOptions(maxBatch, TOKEN_BUDGET,
                        KvCacheOptions.builder().maxSeqLen(prompt + MAX_TOKENS).maxNumPages(pages).pageSize(PAGE)
                                .prefixCache(false).build());
                try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config), options,
                        dtype)) {
                    for (int b : batches) {
                        measure(engine, config, name, d, b);
                        Row row = measure(engine, config, name, d, b);
                        System.out.printf(Locale.ROOT, "parallel bench: %s, %d layers, %d devices, batch %d: decode "
                                + "%.2f ms/step, prefill %.0f tok/s%n", name, config.numLayers(), d, b,
                                row.decodeMillis(), row.prefillTokensPerSecond());
                        rows.add(row);
                    }
                }
            }
        }
        return rows;
    }

    /** Random weights made on the group's first device, split over the group when it has more than one. */
    private LlamaModel model(ModelConfig config, DeviceGroup group, DType dtype) {
        LlamaWeights full = RandomWeights.create(config, group.device(0), dtype, seed);
        if (group.size() == 1) {
            return new LlamaModel(full, dtype, "random:" + seed);
        }
        try (full) {
            ShardedWeights shards = ShardedWeights.split(full, ShardLayout.of(config, group.size()), group);
            return new LlamaModel(shards, group, dtype, "random:" + seed);
        }
    }

    private Row measure(LlamaEngine engine, ModelConfig config, String name, int degree, int batch) {
        Random rnd = new Random(seed + batch);
        runs++;
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            String id = "tp" + runs + "-" + i;
            ids.add(id);
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config, prompt), MAX_TOKENS));
        }
        Set<String> started = new HashSet<>();
        long start = System.nanoTime();
        while (started.size() < batch) {
            BenchRequests.step(engine).tokens().forEach(t -> started.add(t.requestId()));
        }
        double prefillSeconds = (System.nanoTime() - start) / 1e9;
        for (int i = 0; i < WARMUP_STEPS; i++) {
            BenchRequests.step(engine);
        }
        start = System.nanoTime();
        for (int i = 0; i < DECODE_STEPS; i++) {
            BenchRequests.step(engine);
        }
        double decodeMillis = (System.nanoTime() - start) / 1e6 / DECODE_STEPS;
        ids.forEach(engine::remove);
        double meanContext = prompt + 1 + WARMUP_STEPS + DECODE_STEPS / 2.0;
        return new Row(name, config.numLayers(), degree, batch, decodeMillis, batch * (double) prompt / prefillSeconds,
                ModelCost.weightBytesRead(config, batch), batch * meanContext * ModelCost.kvBytesPerToken(config));
    }

    /** The rows with each degree's time against one device's. */
    static String table(List<Row> rows, double tbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append("| model | layers | devices | batch | decode ms/step | bound ms (bytes / devices / ").append(tbPerS)
                .append(" TB/s) | of bound | speed-up over 1 device | prefill tok/s |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            double single = rows.stream().filter(o -> o.degree() == 1 && o.batch() == r.batch()
                    && o.model().equals(r.model())).mapToDouble(Row::decodeMillis).findFirst().orElse(Double.NaN);
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %.2f | %.2f | %.0f%% | %.2f | %.0f |%n",
                    r.model(), r.layers(), r.degree(), r.batch(), r.decodeMillis(), r.boundMillis(tbPerS),
                    100 * r.boundMillis(tbPerS) / r.decodeMillis(), single / r.decodeMillis(),
                    r.prefillTokensPerSecond()));
        }
        return sb.toString();
    }
}
