package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.StepResult;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;
import org.mstar.resources.SamplingReqConfig;

/**
 * Batch invariance on the GPU, the property that makes a request recomputed after a restore continue with
 * the lost run's tokens: one request's tokens and logits must have the same bits whether it is served alone,
 * among many others with its prompt cut into chunks and its decode steps replayed from graphs, or resumed
 * from its first tokens in a fresh engine. bf16 on two layers of Llama-3.1-8B's geometry (the projection
 * shapes whose cuBLAS algorithms change with the row count), random weights. Checked with the device's
 * batch-invariant numerics on; the same runs with them off are reported in the notes, to show what the
 * mode buys.
 */
final class InvarianceChecks {
    private static final int GENERATED = 48;
    private static final int RESUME_AFTER = 20;
    private static final int TARGET_PROMPT = 300;
    private static final int OTHERS = 23;
    private static final String TARGET = "target";
    /**
     * Row counts for the matmul check: below, at and above where cuBLAS changed algorithms on an H200, and on both
     * sides of each power of two (the batch-invariant matmuls tune their algorithm per power-of-two bucket).
     */
    private static final int[] MATMUL_ROWS = {1, 2, 3, 5, 8, 13, 16, 17, 31, 33, 48, 64, 65, 100, 128, 129, 200, 256,
        257, 300, 1000};

    private final Twin tw;
    private final CudaDevice gpu;
    private final long seed;
    private final StringBuilder notes = new StringBuilder();

    InvarianceChecks(Twin tw, long seed) {
        this.tw = tw;
        this.gpu = tw.gpu;
        this.seed = seed;
    }

    static ModelConfig geometry() {
        return EngineBench.llama3_8b().toBuilder().numLayers(2).vocabSize(32_000).bosTokenId(0).eosTokenId(1)
                .maxPositionEmbeddings(4096).build();
    }

    List<CheckResult> run() {
        List<CheckResult> results = new ArrayList<>();
        ModelConfig config = geometry();
        try (LlamaWeights weights = RandomWeights.create(config, gpu, DType.BF16, seed)) {
            for (boolean invariant : new boolean[] {true, false}) {
                CudaDevice mode = gpu.withOptions(gpu.options().withBatchInvariant(invariant));
                matmuls(mode, config, invariant, results);
                // a model per mode over the same weights (not closed: that would close the weights)
                engine(new LlamaModel(weights, mode, DType.BF16, "random:" + seed), config, invariant, results);
            }
        }
        return results;
    }

    String notes() {
        return notes.toString();
    }

    /** The first and last row of every projection at each row count against the same row alone, bit for bit. */
    private void matmuls(CudaDevice mode, ModelConfig c, boolean invariant, List<CheckResult> results) {
        int h = c.hiddenSize();
        int kvDim = c.numKvHeads() * c.headDim();
        int[][] shapes = {{h + 2 * kvDim, h}, {h, c.numHeads() * c.headDim()}, {2 * c.intermediateSize(), h},
            {h, c.intermediateSize()}, {c.vocabSize(), h}};
        String[] names = {"qkv", "o", "gate_up", "down", "lm_head"};
        int maxRows = Arrays.stream(MATMUL_ROWS).max().orElseThrow();
        for (int s = 0; s < shapes.length; s++) {
            int n = shapes[s][0];
            int k = shapes[s][1];
            try (Tensor w = AttentionBench.randomBf16(tw, n, k);
                 Tensor x = AttentionBench.randomBf16(tw, maxRows, k);
                 Tensor one = mode.allocate(DType.BF16, 1, n)) {
                Map<Integer, float[]> alone = new HashMap<>();
                List<Integer> differing = new ArrayList<>();
                for (int m : MATMUL_ROWS) {
                    try (Tensor out = mode.allocate(DType.BF16, m, n)) {
                        mode.ops().matmul(x.rows(0, m), w, null, out);
                        boolean same = true;
                        for (int r : new int[] {0, m - 1}) {
                            float[] got = mode.toFloats(out.rows(r, 1));
                            float[] ref = alone.computeIfAbsent(r, row -> {
                                mode.ops().matmul(x.rows(row, 1), w, null, one);
                                return mode.toFloats(one);
                            });
                            same &= Arrays.equals(ref, got);
                        }
                        if (!same) {
                            differing.add(m);
                        }
                    }
                }
                String shape = "[M," + k + "]·[" + n + "," + k + "]ᵀ " + names[s] + ", " + MATMUL_ROWS.length
                        + " row counts 1.." + maxRows;
                if (invariant) {
                    results.add(new CheckResult("matmul batch invariance (row counts where row 0 or M-1 differs)",
                            shape, "BF16", differing.size(), 0, 0, "gpu, same row alone"));
                } else {
                    notes.append(String.format(Locale.ROOT, "cuBLAS as it chooses, %s: row 0 or M-1 differs from "
                            + "the row alone at M = %s%n", names[s], differing));
                }
            }
        }
    }

    /** The target request alone, in a crowd (chunked, graphs) and resumed; tokens and logits against alone. */
    private void engine(LlamaModel model, ModelConfig config, boolean invariant, List<CheckResult> results) {
        Random rnd = new Random(seed + 1);
        GenerationRequest target = request(TARGET, TARGET_PROMPT, GENERATED, rnd, config);
        List<GenerationRequest> others = new ArrayList<>();
        for (int i = 0; i < OTHERS; i++) {
            others.add(request("other" + i, 5 + rnd.nextInt(700), 16 + rnd.nextInt(48), rnd, config));
        }
        Transcript alone = serve(model, config, options(4096, false), List.of(target), null, null);
        List<GenerationRequest> crowd = new ArrayList<>(others);
        crowd.add(target);
        Transcript crowded = serve(model, config, options(64, true), crowd, null, null);
        Transcript resumed = serve(model, config, options(256, true), others.subList(0, 8), target,
                Arrays.copyOf(alone.tokens, RESUME_AFTER));
        String mode = invariant ? "batch-invariant" : "cuBLAS as it chooses, decode kernel";
        for (Object[] c : new Object[][] {{"crowd of 24, 64-token chunks, graphs", crowded, 0},
            {"resumed after " + RESUME_AFTER + " tokens among 8", resumed, RESUME_AFTER}}) {
            Transcript t = (Transcript) c[1];
            int from = (int) c[2];
            int tokensDiffering = 0;
            int rowsDiffering = 0;
            for (int i = from; i < GENERATED; i++) {
                tokensDiffering += i < t.tokens.length && t.tokens[i] == alone.tokens[i] ? 0 : 1;
                float[] a = alone.logits.get(i);
                float[] b = t.logits.get(i);
                rowsDiffering += a != null && b != null && Arrays.equals(a, b) ? 0 : 1;
            }
            String shape = "h4096 L2 v32000, target " + TARGET_PROMPT + "+" + GENERATED + " tokens, " + c[0];
            if (invariant) {
                results.add(new CheckResult("engine batch invariance: tokens differing", shape, "BF16",
                        tokensDiffering, 0, t.millisPerStep(), "gpu, target alone"));
                results.add(new CheckResult("engine batch invariance: logit rows not bit-identical", shape, "BF16",
                        rowsDiffering, 0, t.millisPerStep(), "gpu, target alone"));
            } else {
                notes.append(String.format(Locale.ROOT, "%s, %s: %d of %d tokens and %d of %d logit rows differ "
                        + "from the target alone%n", mode, c[0], tokensDiffering, GENERATED - from, rowsDiffering,
                        GENERATED - from));
            }
        }
    }

    private static EngineOptions options(int tokenBudget, boolean graphs) {
        return new EngineOptions(64, tokenBudget, KvCacheOptions.builder().maxSeqLen(1024).maxNumPages(2048)
                .prefixCache(false).build(), graphs);
    }

    /** The target's tokens (all of them, resumed ones included) and the logits of each token it drew here. */
    private record Transcript(int[] tokens, Map<Integer, float[]> logits, int steps, double millis) {
        double millisPerStep() {
            return steps == 0 ? 0 : millis / steps;
        }
    }

    private static Transcript serve(LlamaModel model, ModelConfig config, EngineOptions options,
                                    List<GenerationRequest> submit, GenerationRequest resume, int[] generated) {
        Map<Integer, float[]> logits = new HashMap<>();
        int[] tokens = null;
        int steps = 0;
        long start = System.nanoTime();
        try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config), options, DType.BF16)) {
            engine.observeLogits((rid, index, l) -> {
                if (rid.equals(TARGET)) {
                    logits.put(index, l);
                }
            });
            submit.forEach(engine::submit);
            if (resume != null) {
                engine.resume(resume, generated);
            }
            while (engine.hasWork()) {
                StepResult r = engine.step();
                steps++;
                if (!r.failures().isEmpty()) {
                    throw new IllegalStateException("engine failed requests: " + r.failures());
                }
                for (FinishedRequest f : r.finished()) {
                    if (f.requestId().equals(TARGET)) {
                        tokens = f.tokenIds();
                    }
                }
            }
        }
        if (tokens == null) {
            throw new IllegalStateException("the target request did not finish");
        }
        return new Transcript(tokens, logits, steps, (System.nanoTime() - start) / 1e6);
    }

    /** The target's prompt is the same in every run: drawn from its own seed, not from {@code rnd}. */
    private GenerationRequest request(String id, int promptLength, int generated, Random rnd, ModelConfig config) {
        Random r = id.equals(TARGET) ? new Random(seed + 7) : rnd;
        int[] prompt = new int[promptLength];
        for (int j = 0; j < prompt.length; j++) {
            prompt[j] = 2 + r.nextInt(config.vocabSize() - 2);
        }
        return GenerationRequest.builder(id).promptTokenIds(prompt).sampling(SamplingReqConfig.greedy())
                .maxTokens(generated).ignoreEos(true).build();
    }
}
