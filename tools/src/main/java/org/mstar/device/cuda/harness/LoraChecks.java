package org.mstar.device.cuda.harness;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngine;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.lora.RandomPeftAdapters;

/**
 * The engine with per-request LoRA adapters on the candidate device against the fp32 engine on the reference (CPU)
 * device: a random Llama checkpoint and two random PEFT adapters (rank {@value #RANK_X} on all seven modules; rank
 * {@value #RANK_Y} with rank-stabilised scaling on q, v and down), one batch of greedy requests of both adapters and of
 * the base model sharing steps, with prompts cut into prefill chunks, as {@link EngineChecks} serves its batch.
 *
 * <p>fp32: tokens identical and logits within {@value EngineChecks#F32_TOLERANCE}; bf16: logits within
 * {@value EngineChecks#BF16_TOLERANCE} wherever both engines share the context; bf16 with decode graphs (their adapter
 * variant) against the same engine eager: tokens identical, logits within {@value EngineChecks#GRAPHS_TOLERANCE}. The
 * notes say how far the adapter rows' logits lie from the base model's on the reference, so that the bf16 band can be
 * read against the adapters' effect.
 */
final class LoraChecks {
    private static final int RANK_X = 8;
    private static final int RANK_Y = 4;
    /** Each request's adapter ({@link EngineChecks#PROMPT_LENGTHS}' order), base-model rows between them. */
    private static final String[] ADAPTERS = {"x", "y", null, "y", "x", null};
    private static final int TOKEN_BUDGET = 64;

    private final Device reference;
    private final Device candidate;
    private final ModelConfig config;
    private final long seed;
    private final StringBuilder notes = new StringBuilder();

    LoraChecks(Device reference, Device candidate, ModelConfig config, long seed) {
        this.reference = reference;
        this.candidate = candidate;
        this.config = config;
        this.seed = seed;
    }

    /** Writes the checkpoint and the adapters under {@code dir}, runs the engines and compares them. */
    List<CheckResult> run(Path dir) throws IOException {
        Path model = dir.resolve("model");
        Path adapters = dir.resolve("adapters");
        CheckpointWriter.writeRandom(config, DType.F32, seed, model);
        RandomPeftAdapters.write(adapters, config, new RandomPeftAdapters.Spec("x", RANK_X, 1, false,
                LoraBench.MODULES), seed + 1);
        RandomPeftAdapters.write(adapters, config, new RandomPeftAdapters.Spec("y", RANK_Y, 0.5, true,
                List.of("q_proj", "v_proj", "down_proj")), seed + 2);
        List<GenerationRequest> requests = requests(true);
        EngineTranscript ref = transcript(model, adapters, reference, DType.F32, requests, false);
        EngineTranscript base = transcript(model, adapters, reference, DType.F32, requests(false), false);
        EngineTranscript f32 = transcript(model, adapters, candidate, DType.F32, requests, false);
        EngineTranscript bf16 = transcript(model, adapters, candidate, DType.BF16, requests, false);
        EngineTranscript bf16Graphs = transcript(model, adapters, candidate, DType.BF16, requests, true);

        String shape = String.format(Locale.ROOT, "%s h%d L%d, %d requests (adapters x r%d, y r%d, none) x %d tokens",
                config.architecture().modelType(), config.hiddenSize(), config.numLayers(), requests.size(), RANK_X,
                RANK_Y, EngineChecks.GENERATED);
        List<CheckResult> results = new ArrayList<>();
        EngineChecks.Agreement a32 = EngineChecks.compare(requests, ref, f32);
        EngineChecks.Agreement a16 = EngineChecks.compare(requests, ref, bf16);
        EngineChecks.Agreement graphs = EngineChecks.compare(requests, bf16, bf16Graphs);
        results.add(new CheckResult("engine with adapters: greedy tokens (differing)", shape, "F32",
                a32.tokensDiffering(), 0, f32.millis / f32.steps, "cpu engine"));
        results.add(new CheckResult("engine with adapters: logits (worst row)", shape, "F32", a32.worstError(),
                EngineChecks.F32_TOLERANCE, f32.millis / f32.steps, "cpu engine"));
        // the adapters' bf16 products round once more than the base model's: the band is the CPU bf16 engine's own
        // distance from fp32 (the same roundings) with half again as margin, where that is wider than the base band
        EngineTranscript cpuBf16 = transcript(model, adapters, reference, DType.BF16, requests, false);
        double bf16Band = Math.max(EngineChecks.BF16_TOLERANCE,
                1.5 * EngineChecks.compare(requests, ref, cpuBf16).worstError());
        results.add(new CheckResult("engine with adapters: logits, shared contexts (worst row)", shape, "BF16",
                a16.worstError(), bf16Band, bf16.millis / bf16.steps, "cpu engine fp32"));
        results.add(new CheckResult("engine with adapters, decode graphs: greedy tokens (differing)", shape, "BF16",
                graphs.tokensDiffering(), 0, bf16Graphs.millis / bf16Graphs.steps, "same engine eager"));
        results.add(new CheckResult("engine with adapters, decode graphs: logits (worst row)", shape, "BF16",
                graphs.worstError(), EngineChecks.GRAPHS_TOLERANCE, bf16Graphs.millis / bf16Graphs.steps,
                "same engine eager"));

        List<GenerationRequest> adapted = requests.stream().filter(r -> r.adapter() != null).toList();
        EngineChecks.Agreement effect = EngineChecks.compare(adapted, base, ref);
        notes.append(String.format(Locale.ROOT, "Engine with adapters: %s; the adapter rows' first logits lie %.2e "
                        + "(median %.2e) from the base model's on the reference; fp32 %d of %d tokens equal, median row "
                        + "error %.2e; bf16 %d of %d greedy tokens equal the fp32 CPU engine's, %d logit rows compared, "
                        + "median row error %.2e; decode graphs: %d decode steps replayed.%n", shape,
                firstRowError(adapted, base, ref), effect.medianError(), a32.tokensEqual(), a32.tokens(),
                a32.medianError(), a16.tokensEqual(), a16.tokens(), a16.rowsCompared(), a16.medianError(),
                bf16Graphs.graphReplays));
        return results;
    }

    /** What {@link #run} saw besides the check rows. */
    String notes() {
        return notes.toString();
    }

    /** The smallest relative distance of the first token's logits between two transcripts over {@code requests}. */
    private static double firstRowError(List<GenerationRequest> requests, EngineTranscript a, EngineTranscript b) {
        return requests.stream().mapToDouble(r -> Twin.relErr(a.logits.get(r.requestId()).get(0),
                b.logits.get(r.requestId()).get(0))).min().orElse(Double.NaN);
    }

    /** The batch; with {@code adapters} false the same prompts all on the base model. */
    private List<GenerationRequest> requests(boolean adapters) {
        return EngineChecks.requests(config, seed, i -> adapters ? ADAPTERS[i] : null);
    }

    private EngineTranscript transcript(Path model, Path adapters, Device device, DType dtype,
                                        List<GenerationRequest> requests, boolean graphs) throws IOException {
        EngineOptions options = new EngineOptions(8, TOKEN_BUDGET,
                KvCacheOptions.builder().maxSeqLen(1024).maxNumPages(256).build(), graphs)
                .withAdapters(new AdapterOptions(adapters, 2));
        try (LlamaModel m = new LlamaModel(LlamaWeights.load(model, device, dtype), dtype, "checkpoint:" + model);
             LlamaEngine engine = new LlamaEngine(m, null, GenerationConfig.of(config), options, dtype)) {
            return EngineTranscript.record(engine, requests);
        }
    }
}
