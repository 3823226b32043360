package org.mstar.device.cuda.harness;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.function.IntFunction;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.MoeRouting;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngine;
import org.mstar.model.Architecture;
import org.mstar.model.GenerationConfig;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;
import org.mstar.model.RopeScaling;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.SamplingReqConfig;

/**
 * The whole model: a random Llama checkpoint, written to disk and loaded back through
 * {@link LlamaWeights#load}, served by the engine on the candidate device and by the fp32 engine on the
 * reference (CPU) device, one batch of greedy requests whose prompt lengths make prefill chunks and decode
 * rows share steps.
 *
 * <p>fp32 storage and accumulation: tokens must be identical and logits within {@value #F32_TOLERANCE}.
 * Decode graphs with decode steps pre-planned (the default) against the same engine planning each step inline:
 * tokens identical, logits within {@value #GRAPHS_TOLERANCE}.
 * bf16 weights, activations and KV: logits within {@value #BF16_TOLERANCE} wherever both engines still
 * share the context (for a mixture of experts, within the CPU bf16 engine's own distance from fp32 with margin, when
 * that is wider); how many tokens agree is reported, not checked (bf16 weights are a slightly different
 * model, and a near-tie then flips a greedy pick, after which the contexts differ). Logit errors are
 * ‖cand − ref‖ / ‖ref‖ per sampled row, worst row reported.
 */
final class EngineChecks {
    static final int GENERATED = 32;
    static final double F32_TOLERANCE = 1e-4;
    static final double BF16_TOLERANCE = 2e-2;
    /** Decode graphs replay the eager ops on batches padded to a bucket: only GEMM shapes (rows) differ. */
    static final double GRAPHS_TOLERANCE = 1e-5;
    /** Spread so that short prompts decode while long ones are still prefilled in 64-token chunks. */
    static final int[] PROMPT_LENGTHS = {3, 17, 64, 129, 250, 400};
    private static final int TOKEN_BUDGET = 64;

    private final Device reference;
    private final Device candidate;
    private final ModelConfig config;
    private final long seed;
    private final int windowedLayerPages;
    private final StringBuilder notes = new StringBuilder();

    EngineChecks(Device reference, Device candidate, ModelConfig config, long seed) {
        this(reference, candidate, config, seed, 0);
    }

    /**
     * @param windowedLayerPages pages of a separate cache for the windowed layers (both engines), each request
     *     keeping only its window there; 0 = one cache for every layer, with the prefix cache on
     */
    EngineChecks(Device reference, Device candidate, ModelConfig config, long seed, int windowedLayerPages) {
        this.reference = reference;
        this.candidate = candidate;
        this.config = config;
        this.seed = seed;
        this.windowedLayerPages = windowedLayerPages;
    }

    /** Hidden 1024, 8 layers, 16 query / 4 KV heads of 64, vocab 32000, Llama-3 RoPE scaling. */
    static ModelConfig geometry() {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(1024).intermediateSize(2816).numLayers(8).numHeads(16).numKvHeads(4).headDim(64)
                .ropeTheta(500_000).ropeScaling(RopeScaling.llama3(8.0, 1.0, 4.0, 1024))
                .maxPositionEmbeddings(2048).vocabSize(32_000).bosTokenId(0).eosTokenId(1).dtype(DType.F32).build();
    }

    /**
     * The geometries whose forwards differ: {@link #geometry()} and one random model of each further architecture,
     * small enough for the CPU reference, with windows shorter than the longest prompts: Qwen3 (q/k norms, head dim
     * 128), Gemma 3 (q/k norms, sandwich norms, GELU-tanh, scaled embeddings, five windowed layers with their own
     * RoPE base to one global with linear scaling, query_pre_attn_scalar, head dim 256), Phi-3 (fused checkpoint
     * tensors, partial rotary 0.75, a window on every layer), Qwen3-MoE (32 routed experts of width 256, top 4
     * normalised, its second layer dense), OLMoE (16 experts of width 512, top 4, q/k norms over the projection) and
     * DeepSeek-V2 (latent attention at DeepSeek-V2-Lite's head geometry: 16 heads, kv_lora_rank 512, RoPE part 64, nope
     * 128, value 128; a dense first layer, then 32 routed experts of width 256 in 8 groups, top 6 of the best 3 groups
     * as DeepSeek-V2 routes, and 2 shared experts). Its routed weights are scaled by 2.5, not DeepSeek-V2's 16: random
     * experts' outputs are not trained small, and at 16 a bf16 near-tie that swaps one expert for another took the
     * scaled-down model's bf16 logits out of the bf16 band (0.18 against 0.02 on the CPU).
     */
    static List<ModelConfig> geometries() {
        ModelConfig qwen3 = ModelConfig.builder(Architecture.QWEN3)
                .hiddenSize(1024).intermediateSize(3072).numLayers(4).numHeads(16).numKvHeads(8).headDim(128)
                .ropeTheta(1_000_000).rmsNormEps(1e-6).maxPositionEmbeddings(2048).vocabSize(32_000).bosTokenId(0)
                .eosTokenId(1).dtype(DType.F32).build();
        ModelConfig gemma3 = ModelConfig.builder(Architecture.GEMMA3)
                .hiddenSize(640).intermediateSize(2048).numLayers(6).numHeads(4).numKvHeads(1).headDim(256)
                .ropeTheta(1_000_000).ropeScaling(RopeScaling.linear(8)).localRopeTheta(10_000).queryPreAttnScalar(256)
                .slidingWindow(128, 0).windowedLayers(List.of(true, true, true, true, true, false))
                .rmsNormEps(1e-6).tieWordEmbeddings(true).maxPositionEmbeddings(2048).vocabSize(32_000).bosTokenId(0)
                .eosTokenId(1).dtype(DType.F32).build();
        ModelConfig phi3 = ModelConfig.builder(Architecture.PHI3)
                .hiddenSize(1024).intermediateSize(2816).numLayers(4).numHeads(16).numKvHeads(16).headDim(64)
                .partialRotaryFactor(0.75).slidingWindow(200, 0).maxPositionEmbeddings(2048).vocabSize(32_000)
                .bosTokenId(0).eosTokenId(1).dtype(DType.F32).build();
        ModelConfig qwen3Moe = qwen3.toBuilder().architecture(Architecture.QWEN3_MOE).numHeads(32).numKvHeads(4)
                .moe(new MoeConfig(32, 256, MoeRouting.softmaxTopK(4, true), List.of(true, false, true, true))).build();
        ModelConfig olmoe = ModelConfig.builder(Architecture.OLMOE)
                .hiddenSize(1024).intermediateSize(512).numLayers(4).numHeads(16).numKvHeads(16).headDim(64)
                .rmsNormEps(1e-5).maxPositionEmbeddings(2048).vocabSize(32_000).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).moe(new MoeConfig(16, 512, MoeRouting.softmaxTopK(4, false), List.of(true, true, true,
                        true))).build();
        ModelConfig deepseekV2 = ModelConfig.builder(Architecture.DEEPSEEK_V2)
                .hiddenSize(1024).intermediateSize(2816).numLayers(4).numHeads(16).headDim(64)
                .latentAttention(new LatentAttention(0, 512, 128, 64, 128)).rmsNormEps(1e-6).maxPositionEmbeddings(2048)
                .vocabSize(32_000).bosTokenId(0).eosTokenId(1).dtype(DType.F32)
                .moe(new MoeConfig(32, 256, new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 8, 3, 2.5f),
                        List.of(false, true, true, true), 2 * 256)).build();
        return List.of(geometry(), qwen3, gemma3, phi3, qwen3Moe, olmoe, deepseekV2);
    }

    /** Writes the checkpoint into {@code dir}, runs the three engines and compares them. */
    List<CheckResult> run(Path dir) throws IOException {
        CheckpointWriter.writeRandom(config, DType.F32, seed, dir);
        List<GenerationRequest> requests = requests();
        EngineTranscript ref = transcript(dir, reference, DType.F32, requests, false);
        EngineTranscript f32 = transcript(dir, candidate, DType.F32, requests, false);
        EngineTranscript bf16 = transcript(dir, candidate, DType.BF16, requests, false);
        EngineTranscript f32Graphs = transcript(dir, candidate, DType.F32, requests, true);
        EngineTranscript bf16Graphs = transcript(dir, candidate, DType.BF16, requests, true);
        EngineTranscript bf16GraphsInline = transcript(dir, candidate, DType.BF16, requests, true, false, false);
        EngineTranscript bf16GraphsStaged = transcript(dir, candidate, DType.BF16, requests, true, true, false);

        notes.append(String.format(Locale.ROOT, "transcript digests (tokens and logit bits): cpu %s; fp32 %s; bf16 %s; "
                + "fp32 graphs %s; bf16 graphs %s; bf16 graphs, pre-plan off %s; bf16 graphs, not launched ahead %s.%n",
                ref.digest(), f32.digest(), bf16.digest(), f32Graphs.digest(), bf16Graphs.digest(),
                bf16GraphsInline.digest(), bf16GraphsStaged.digest()));
        String shape = String.format(Locale.ROOT, "%s%s h%d L%d v%d, %d requests x %d tokens",
                config.architecture().modelType(), windowedLayerPages > 0 ? " windowed cache" : "", config.hiddenSize(),
                config.numLayers(), config.vocabSize(), requests.size(), GENERATED);
        List<CheckResult> results = new ArrayList<>();
        Agreement a32 = compare(requests, ref, f32);
        Agreement a16 = compare(requests, ref, bf16);
        results.add(new CheckResult("engine greedy tokens (differing)", shape, "F32", a32.tokensDiffering(), 0,
                f32.millis / f32.steps, "cpu engine"));
        results.add(new CheckResult("engine logits (worst row)", shape, "F32", a32.worstError, F32_TOLERANCE,
                f32.millis / f32.steps, "cpu engine"));
        double bf16Band = BF16_TOLERANCE;
        if (config.moe().isPresent()) {
            // A near-tie in the router sends a token to another expert when the weights are rounded to bf16, and
            // the logits move by more than bf16 rounding alone moves them; how far is the model's own, so the band
            // is the CPU's bf16 engine's distance from fp32 (the same roundings) with half again as margin.
            EngineTranscript cpuBf16 = transcript(dir, reference, DType.BF16, requests, false);
            Agreement cpu16 = compare(requests, ref, cpuBf16);
            Agreement near = compare(requests, cpuBf16, bf16);
            bf16Band = Math.max(BF16_TOLERANCE, 1.5 * cpu16.worstError);
            notes.append(String.format(Locale.ROOT, "mixture of experts, bf16: the CPU bf16 engine against the CPU "
                            + "fp32 one: worst row %.2e, median %.2e, %d of %d tokens equal; the candidate against the "
                            + "CPU bf16 engine: worst row %.2e, median %.2e; bf16 band %.2e.%n", cpu16.worstError,
                    cpu16.medianError, cpu16.tokensEqual, cpu16.tokens, near.worstError, near.medianError, bf16Band));
        }
        results.add(new CheckResult("engine logits, shared contexts (worst row)", shape, "BF16", a16.worstError,
                bf16Band, bf16.millis / bf16.steps, "cpu engine fp32"));
        for (EngineTranscript[] pair : new EngineTranscript[][] {{f32, f32Graphs}, {bf16, bf16Graphs}}) {
            String dtype = pair[0] == f32 ? "F32" : "BF16";
            Agreement g = sameEngine(results, "engine decode graphs", shape, dtype, requests, pair[0], pair[1],
                    "same engine eager");
            notes.append(String.format(Locale.ROOT, "decode graphs, %s: %d decode steps replayed; %d logit rows compared, "
                    + "%d bit for bit, median row error %.2e.%n", dtype, pair[1].graphReplays, g.rowsCompared,
                    g.rowsExact, g.medianError));
        }
        // planning a decode step while the one before runs must not change what any step computes
        Agreement pre = sameEngine(results, "engine pre-planned decode steps", shape, "BF16", requests,
                bf16GraphsInline, bf16GraphsStaged, "same engine, pre-plan off");
        notes.append(String.format(Locale.ROOT, "pre-planned decode steps, bf16: %s; %d logit rows compared, %d bit for "
                + "bit.%n", bf16GraphsStaged.preplan, pre.rowsCompared, pre.rowsExact));
        // nor may launching it before the one before is accepted, its tokens copied on the device
        Agreement ahead = sameEngine(results, "engine decode steps launched ahead", shape, "BF16", requests,
                bf16GraphsStaged, bf16Graphs, "same engine, pre-planned, not launched ahead");
        notes.append(String.format(Locale.ROOT, "decode steps launched ahead, bf16: %d of %d steps; %d logit rows "
                + "compared, %d bit for bit.%n", bf16Graphs.launchedAhead, bf16Graphs.steps, ahead.rowsCompared,
                ahead.rowsExact));
        // nor may the qkv projection rotating and appending in its epilogue (the default) instead of qkv_rope_append
        if (candidate instanceof CudaDevice cuda) {
            boolean fusedByDefault = cuda.options().qkvRopeInMatmul();
            CudaDevice switched = cuda.withOptions(cuda.options().withQkvRopeInMatmul(!fusedByDefault));
            EngineTranscript other = transcript(dir, switched, DType.BF16, requests, true);
            sameEngine(results, "engine with RoPE and KV append in the qkv matmul", shape, "BF16", requests,
                    fusedByDefault ? other : bf16Graphs, fusedByDefault ? bf16Graphs : other,
                    "same engine, qkv_rope_append");
        }
        notes.append(String.format(Locale.ROOT, "Engine checks: %s, prompts %s, token budget %d, greedy; GPU ms = wall "
                        + "time per engine step. Reference %d steps in %.0f ms; fp32 %d steps in %.0f ms; bf16 %d steps "
                        + "in %.0f ms.%n", shape, Arrays.toString(PROMPT_LENGTHS), TOKEN_BUDGET, ref.steps, ref.millis,
                f32.steps, f32.millis, bf16.steps, bf16.millis));
        notes.append(String.format(Locale.ROOT, "fp32: %d of %d tokens equal, %d logit rows compared, median row error "
                + "%.2e.%n", a32.tokensEqual, a32.tokens, a32.rowsCompared, a32.medianError));
        notes.append(String.format(Locale.ROOT, "bf16: %d of %d greedy tokens equal the fp32 CPU engine's; tokens before "
                        + "the first difference per request %s; %d logit rows compared (shared contexts), median row "
                        + "error %.2e.%n", a16.tokensEqual, a16.tokens, Arrays.toString(a16.equalPrefix),
                a16.rowsCompared, a16.medianError));
        return results;
    }

    /**
     * Adds the two rows comparing {@code candidate} with {@code base}, the same engine in another setting: greedy
     * tokens differing (none allowed) and the worst logit row (within the graphs' tolerance).
     */
    private static Agreement sameEngine(List<CheckResult> results, String name, String shape, String dtype,
                                        List<GenerationRequest> requests, EngineTranscript base,
                                        EngineTranscript candidate, String against) {
        Agreement a = compare(requests, base, candidate);
        double ms = candidate.millis / candidate.steps;
        results.add(new CheckResult(name + ": greedy tokens (differing)", shape, dtype, a.tokensDiffering(), 0, ms,
                against));
        results.add(new CheckResult(name + ": logits (worst row)", shape, dtype, a.worstError, GRAPHS_TOLERANCE, ms,
                against));
        return a;
    }

    /** What {@link #run} saw besides the check rows: timings, token agreement in bf16. */
    String notes() {
        return notes.toString();
    }

    private List<GenerationRequest> requests() {
        return requests(config, seed, i -> null);
    }

    /**
     * The checks' batch: random prompts of {@link #PROMPT_LENGTHS} drawn from {@code seed}, greedy, {@value #GENERATED}
     * tokens each, request {@code i} with adapter {@code adapterOf.apply(i)} (null: the base model).
     */
    static List<GenerationRequest> requests(ModelConfig config, long seed, IntFunction<String> adapterOf) {
        Random rnd = new Random(seed);
        List<GenerationRequest> requests = new ArrayList<>();
        for (int i = 0; i < PROMPT_LENGTHS.length; i++) {
            int[] prompt = new int[PROMPT_LENGTHS[i]];
            for (int j = 0; j < prompt.length; j++) {
                prompt[j] = 2 + rnd.nextInt(config.vocabSize() - 2); // not BOS or EOS
            }
            requests.add(GenerationRequest.builder("r" + i).promptTokenIds(prompt)
                    .sampling(SamplingReqConfig.greedy()).maxTokens(GENERATED).ignoreEos(true)
                    .adapter(adapterOf.apply(i)).build());
        }
        return requests;
    }

    /** Loads the checkpoint on {@code device} as {@code dtype} (weights, activations and KV) and serves the batch. */
    private EngineTranscript transcript(Path dir, Device device, DType dtype, List<GenerationRequest> requests,
                                        boolean graphs) throws IOException {
        return transcript(dir, device, dtype, requests, graphs, true, true);
    }

    /** As above, with decode steps pre-planned and launched ahead or not (only with {@code graphs}). */
    private EngineTranscript transcript(Path dir, Device device, DType dtype, List<GenerationRequest> requests,
                                        boolean graphs, boolean preplan, boolean launchAhead) throws IOException {
        KvCacheOptions kv = windowedLayerPages > 0 ? KvCacheOptions.builder().maxSeqLen(1024).maxNumPages(256)
                .prefixCache(false).windowedLayerPages(windowedLayerPages).build()
                : KvCacheOptions.builder().maxSeqLen(1024).maxNumPages(256).build();
        EngineOptions options = new EngineOptions(8, TOKEN_BUDGET, kv, graphs).withPreplan(preplan)
                .withLaunchAhead(launchAhead);
        try (LlamaModel model = new LlamaModel(LlamaWeights.load(dir, device, dtype), dtype, "checkpoint:" + dir);
             LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config), options, dtype)) {
            return EngineTranscript.record(engine, requests);
        }
    }

    /** Token agreement and logit errors of a candidate against the reference. */
    record Agreement(int tokens, int tokensEqual, int[] equalPrefix, int rowsCompared, int rowsExact,
                             double worstError, double medianError) {
        int tokensDiffering() {
            return tokens - tokensEqual;
        }
    }

    /** Logits are compared where both engines drew from the same context: up to each request's first difference. */
    static Agreement compare(List<GenerationRequest> requests, EngineTranscript ref, EngineTranscript cand) {
        int tokens = 0;
        int equal = 0;
        int[] prefix = new int[requests.size()];
        List<Double> errors = new ArrayList<>();
        int exact = 0;
        for (int i = 0; i < requests.size(); i++) {
            String rid = requests.get(i).requestId();
            int[] r = ref.tokens.get(rid);
            int[] c = cand.tokens.get(rid);
            tokens += r.length;
            for (int j = 0; j < r.length; j++) {
                if (j < c.length && r[j] == c[j]) {
                    equal++;
                }
            }
            while (prefix[i] < Math.min(r.length, c.length) && r[prefix[i]] == c[prefix[i]]) {
                prefix[i]++;
            }
            // the logits of token j come from the prompt and tokens 0..j-1
            int shared = Math.min(prefix[i] + 1, Math.min(r.length, c.length));
            for (int j = 0; j < shared; j++) {
                errors.add(Twin.relErr(ref.logits.get(rid).get(j), cand.logits.get(rid).get(j)));
                exact += Arrays.equals(ref.logits.get(rid).get(j), cand.logits.get(rid).get(j)) ? 1 : 0;
            }
        }
        double[] sorted = errors.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        double worst = sorted.length == 0 ? Double.POSITIVE_INFINITY : sorted[sorted.length - 1];
        double median = sorted.length == 0 ? Double.NaN : sorted[sorted.length / 2];
        return new Agreement(tokens, equal, prefix, sorted.length, exact, worst, median);
    }
}
