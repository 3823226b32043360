package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.OptionalInt;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.cuda.harness.EngineChecks.Agreement;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.HybridEngine;
import org.mstar.model.GenerationConfig;
import org.mstar.model.HybridConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.HybridModel;
import org.mstar.model.mamba.HybridWeights;
import org.mstar.model.mamba.StateSnapshots;
import org.mstar.resources.SamplingReqConfig;

/**
 * Whole Mamba2 and Bamba models on the candidate device against the reference (the CPU engine), on random weights of
 * a small geometry whose mixers have Bamba-9B's head width (64) and two groups: prompts prefilled in 64-token chunks
 * continuing from the stored state, beside other requests' decode rows. fp32: greedy tokens identical, logits within
 * {@value EngineChecks#F32_TOLERANCE}; bf16 weights and activations (fp32 states): logits within
 * {@value EngineChecks#BF16_TOLERANCE} wherever both engines share the context; decode graphs against the same
 * engine eager (fp32): tokens identical, logits within {@value EngineChecks#GRAPHS_TOLERANCE}.
 */
final class HybridEngineChecks {
    private static final int[] PROMPT_LENGTHS = {3, 17, 64, 129, 250};
    private static final int TOKEN_BUDGET = 64;

    private final Device reference;
    private final Device candidate;
    private final long seed;

    HybridEngineChecks(Device reference, Device candidate, long seed) {
        this.reference = reference;
        this.candidate = candidate;
        this.seed = seed;
    }

    /** Mamba2 (4 mixer layers) and Bamba (layer 2 attention of 4 / 2 heads of 64, an MLP in every layer). */
    static List<HybridConfig> geometries() {
        Mamba2Shape mixer = new Mamba2Shape(8, 64, 2, 64, 4, 64, 0f, Float.POSITIVE_INFINITY);
        HybridConfig mamba2 = new HybridConfig(HybridConfig.Family.MAMBA2, 256, 4, 2048, 1e-5, false,
                OptionalInt.empty(), List.of(), mixer, true, List.of(), 0, 0, 0, 0, 0, Integer.MAX_VALUE);
        HybridConfig bamba = new HybridConfig(HybridConfig.Family.BAMBA, 256, 4, 2048, 1e-6, false,
                OptionalInt.empty(), List.of(), mixer, true, List.of(2), 4, 2, 32, 10_000, 512, 4096);
        return List.of(mamba2, bamba);
    }

    List<CheckResult> run() {
        List<CheckResult> results = new ArrayList<>();
        for (HybridConfig config : geometries()) {
            String name = config.family().modelType();
            CheckResult.attempt(results, name + " engine", () -> results.addAll(run(config)));
        }
        return results;
    }

    private List<CheckResult> run(HybridConfig config) {
        List<GenerationRequest> requests = requests(config);
        EngineTranscript ref = transcript(config, reference, DType.F32, requests, false);
        EngineTranscript f32 = transcript(config, candidate, DType.F32, requests, false);
        EngineTranscript bf16 = transcript(config, candidate, DType.BF16, requests, false);
        EngineTranscript f32Graphs = transcript(config, candidate, DType.F32, requests, true);
        String shape = String.format(Locale.ROOT, "%s h%d L%d, %d requests x %d tokens", config.family().modelType(),
                config.hiddenSize(), config.numLayers(), requests.size(), EngineChecks.GENERATED);
        Agreement a32 = EngineChecks.compare(requests, ref, f32);
        Agreement a16 = EngineChecks.compare(requests, ref, bf16);
        Agreement graphs = EngineChecks.compare(requests, f32, f32Graphs);
        List<CheckResult> results = new ArrayList<>();
        results.add(new CheckResult("engine greedy tokens (differing)", shape, "F32", a32.tokensDiffering(), 0,
                f32.millis / f32.steps, "cpu engine"));
        results.add(new CheckResult("engine logits (worst row)", shape, "F32", a32.worstError(),
                EngineChecks.F32_TOLERANCE, f32.millis / f32.steps, "cpu engine"));
        results.add(new CheckResult("engine logits, shared contexts (worst row)", shape, "BF16", a16.worstError(),
                EngineChecks.BF16_TOLERANCE, bf16.millis / bf16.steps, "cpu engine fp32"));
        results.add(new CheckResult("engine decode graphs: greedy tokens (differing)", shape, "F32",
                graphs.tokensDiffering(), 0, f32Graphs.millis / f32Graphs.steps, "same engine eager"));
        results.add(new CheckResult("engine decode graphs: logits (worst row)", shape, "F32", graphs.worstError(),
                EngineChecks.GRAPHS_TOLERANCE, f32Graphs.millis / f32Graphs.steps, "same engine eager"));
        return results;
    }

    private List<GenerationRequest> requests(HybridConfig config) {
        Random rnd = new Random(seed);
        List<GenerationRequest> requests = new ArrayList<>();
        for (int i = 0; i < PROMPT_LENGTHS.length; i++) {
            int[] prompt = new int[PROMPT_LENGTHS[i]];
            for (int j = 0; j < prompt.length; j++) {
                prompt[j] = rnd.nextInt(config.vocabSize());
            }
            requests.add(GenerationRequest.builder("r" + i).promptTokenIds(prompt)
                    .sampling(SamplingReqConfig.greedy()).maxTokens(EngineChecks.GENERATED).ignoreEos(true).build());
        }
        return requests;
    }

    /** Random weights of {@code config} on {@code device} as {@code dtype}, serving the batch. */
    private EngineTranscript transcript(HybridConfig config, Device device, DType dtype,
                                        List<GenerationRequest> requests, boolean graphs) {
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(1024).maxNumPages(256).prefixCache(false).build();
        EngineOptions options = new EngineOptions(8, TOKEN_BUDGET, kv, graphs);
        try (HybridWeights weights = HybridWeights.random(config, device, dtype, seed);
             HybridEngine engine = new HybridEngine(new HybridModel(weights, dtype, "random:" + seed,
                     options.maxBatchRows(), StateSnapshots.defaults(options.maxBatchRows())), null,
                     new GenerationConfig(OptionalInt.empty(), List.of()), options, dtype)) {
            return EngineTranscript.record(engine, engine::observeLogits, requests);
        }
    }
}
