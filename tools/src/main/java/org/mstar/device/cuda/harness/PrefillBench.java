package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.StepResult;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;

/**
 * Engine prefill throughput on the bf16 engine with random weights (Llama-3-8B geometry made on the GPU):
 * per row, {@code batch} random prompts of {@code prompt} tokens submitted together and stepped under an
 * {@value #TOKEN_BUDGET}-token budget until each has its first token (longer prompts are prefilled in
 * chunks against their cached prefix), wall clock around the steps. Every row runs with the tensor-core
 * prefill attention and with the CUDA-core kernel it replaced, on the same weights; each measurement is
 * the median of {@value #TIMED_RUNS} identical runs after a first one (which meets the shapes for the first time):
 * a single run carries the host's jitter (a garbage collection, code still being compiled) whole.
 */
final class PrefillBench {
    static final int TOKEN_BUDGET = 8192;
    private static final int PAGE = 16;
    private static final int TIMED_RUNS = 3;

    record Row(int layers, int prompt, int batch, boolean tensorCores, int steps, double millis) {
        double tokensPerSecond() {
            return (double) prompt * batch / (millis / 1e3);
        }
    }

    private final Device device;
    private final long seed;
    private final WeightQuantization quantization;
    private int runs;

    /** On a device other than CUDA both kernel rows run the one attention path there is. */
    PrefillBench(Device device, long seed) {
        this(device, seed, WeightQuantization.NONE);
    }

    /** With the projections' weights kept as {@code quantization} says (FP8: quantised at load, one scale a row). */
    PrefillBench(Device device, long seed, WeightQuantization quantization) {
        this.device = device;
        this.seed = seed;
        this.quantization = quantization;
    }

    /** @param cases {prompt tokens, prompts} pairs; each with both attention kernels */
    List<Row> run(ModelConfig geometry, int layers, int[][] cases) {
        return run(geometry, layers, cases, true);
    }

    /** @param bothKernels also each case with the CUDA-core kernel; otherwise with the device's default only */
    List<Row> run(ModelConfig geometry, int layers, int[][] cases, boolean bothKernels) {
        ModelConfig config = geometry.toBuilder().numLayers(layers).build();
        int maxPrompt = 0;
        int maxBatch = 0;
        int maxPages = 0;
        for (int[] c : cases) {
            maxPrompt = Math.max(maxPrompt, c[0]);
            maxBatch = Math.max(maxBatch, c[1]);
            maxPages = Math.max(maxPages, c[1] * ((c[0] + 2 + PAGE - 1) / PAGE));
        }
        List<Row> rows = new ArrayList<>();
        EngineOptions options = new EngineOptions(maxBatch, TOKEN_BUDGET,
                KvCacheOptions.builder().maxSeqLen(maxPrompt + 2).maxNumPages(maxPages + PAGE).pageSize(PAGE)
                        .prefixCache(false).build());
        boolean[] kernels = bothKernels ? new boolean[] {true, false} : new boolean[] {true};
        try (LlamaWeights weights = RandomWeights.create(config, device, DType.BF16, seed, quantization)) {
            // an engine per prefill kernel over the same weights, each through a view of the device choosing it
            // (the models are not closed: that would close the weights)
            List<LlamaEngine> engines = new ArrayList<>();
            try {
                for (boolean tensorCores : kernels) {
                    Device view = device.withOptions(device.options().withTensorCorePrefill(tensorCores));
                    engines.add(new LlamaEngine(new LlamaModel(weights, view, DType.BF16, "random:" + seed), null,
                            GenerationConfig.of(config), options, DType.BF16));
                }
                for (int[] c : cases) {
                    for (int k = 0; k < kernels.length; k++) {
                        measure(engines.get(k), config, c[0], c[1], layers, kernels[k]);
                        List<Row> timed = new ArrayList<>();
                        for (int i = 0; i < TIMED_RUNS; i++) {
                            timed.add(measure(engines.get(k), config, c[0], c[1], layers, kernels[k]));
                        }
                        timed.sort(Comparator.comparingDouble(Row::millis));
                        Row row = timed.get(TIMED_RUNS / 2);
                        System.out.printf(Locale.ROOT, "prefill bench: %d layers, %d x %d tokens, %s: %.0f tok/s%n",
                                layers, c[1], c[0], kernels[k] ? "tensor cores" : "CUDA cores", row.tokensPerSecond());
                        rows.add(row);
                    }
                }
            } finally {
                engines.forEach(LlamaEngine::close);
            }
        }
        return rows;
    }

    private Row measure(LlamaEngine engine, ModelConfig config, int prompt, int batch, int layers, boolean tensorCores) {
        Random rnd = new Random(seed + prompt * 31L + batch);
        runs++;
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            String id = "prefill" + runs + "-" + i;
            ids.add(id);
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config, prompt), 2));
        }
        Set<String> started = new HashSet<>();
        int steps = 0;
        long start = System.nanoTime();
        while (started.size() < batch) {
            StepResult r = engine.step();
            if (!r.failures().isEmpty()) {
                throw new IllegalStateException("engine failed requests: " + r.failures());
            }
            r.tokens().forEach(t -> started.add(t.requestId()));
            steps++;
        }
        double millis = (System.nanoTime() - start) / 1e6;
        ids.forEach(engine::remove);
        return new Row(layers, prompt, batch, tensorCores, steps, millis);
    }

    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder("| layers | prompt tokens | prompts | prefill attention | steps | ms | tok/s |\n"
                + "|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %d | %s | %d | %.1f | %.0f |%n", r.layers, r.prompt,
                    r.batch, r.tensorCores ? "tensor cores" : "CUDA cores", r.steps, r.millis, r.tokensPerSecond()));
        }
        return sb.toString();
    }
}
