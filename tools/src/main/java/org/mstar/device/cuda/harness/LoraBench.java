package org.mstar.device.cuda.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.LlamaEngine;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;
import org.mstar.model.lora.PeftAdapterConfig;
import org.mstar.model.lora.PeftAdapters;
import org.mstar.model.lora.RandomPeftAdapters;

/**
 * Engine decode with per-request LoRA adapters against the base model: the bf16 engine on random weights made on the
 * device, {@code batch} random prompts of {@code context} tokens decoding together (as {@link DecodeBench} measures a
 * case), first on an engine without adapters, then on one serving PEFT adapters of rank {@value #RANK} on all seven
 * modules with the batch's requests spread round-robin over 0 (every row the base model) and each count of distinct
 * adapters. Each graphs setting has its own pair of engines; the ratio is to that setting's engine without adapters.
 *
 * <p>The adapters share one random weights file (writing a Llama-3-8B-sized file per adapter would take longer than the
 * measurement) and differ in {@code lora_alpha}; every adapter still gets a slot of its own on the device, so a step
 * with n adapters reads n adapters' weights. Their scales are small, so the random updates leave the activations in
 * range.
 */
final class LoraBench {
    static final int RANK = 16;
    /** The bar: decode with adapters at no less than this share of the base model's tokens/s. */
    static final double TARGET = 0.9;
    static final List<String> MODULES = List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
            "down_proj");
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int PAGE = 16;

    /**
     * One measured engine: {@code adapters} distinct adapters among the batch's rows (0: all the base model) on an
     * engine serving adapters, or none at all ({@code served} false).
     *
     * @param loads adapters loaded into slots while the case ran (during its prefill, not timed)
     */
    record Row(boolean served, int adapters, boolean graphs, int batch, int context, double millisPerStep,
               long loads) {
        double tokensPerSecond() {
            return batch / (millisPerStep / 1e3);
        }

        String engine() {
            return served ? "with adapters" : "without adapters";
        }
    }

    private final Device device;
    private final long seed;

    LoraBench(Device device, long seed) {
        this.device = device;
        this.seed = seed;
    }

    /**
     * The rows of every graphs setting: the engine without adapters, then the engine serving {@code max(adapterCounts)}
     * adapters (written into {@code folder}, which must be empty or absent) at each count, 0 first.
     */
    List<Row> run(ModelConfig config, int batch, int context, int[] adapterCounts, boolean[] graphSettings,
                  Path folder) throws IOException {
        int adapters = Arrays.stream(adapterCounts).max().orElseThrow();
        long start = System.nanoTime();
        writeAdapters(folder, config, adapters, seed);
        System.out.printf(Locale.ROOT, "lora bench: %d adapters of rank %d written in %.1f s%n", adapters, RANK,
                (System.nanoTime() - start) / 1e9);
        DecodeBench bench = new DecodeBench(device, seed);
        List<Row> rows = new ArrayList<>();
        try (LlamaWeights weights = RandomWeights.create(config, device, DType.BF16, seed)) {
            long streamed = weights.byteSize() - (weights.tiedEmbeddings() ? 0 : weights.embedding().byteSize());
            for (boolean graphs : graphSettings) {
                DecodeBench.Case c = new DecodeBench.Case(batch, context, graphs);
                EngineOptions options = options(c);
                try (LlamaEngine engine = engine(weights, config, options)) {
                    DecodeBench.Row r = bench.measure(engine, "lora", config, c, streamed, i -> null);
                    rows.add(report(new Row(false, 0, graphs, batch, context, r.millisPerStep(), 0)));
                }
                try (LlamaEngine engine = engine(weights, config,
                        options.withAdapters(new AdapterOptions(folder, adapters)))) {
                    for (int n : adapterCounts) {
                        long loadsBefore = engine.stats().adapterLoads();
                        DecodeBench.Row r = bench.measure(engine, "lora", config, c, streamed,
                                i -> n == 0 ? null : adapterName(i % n));
                        rows.add(report(new Row(true, n, graphs, batch, context, r.millisPerStep(),
                                engine.stats().adapterLoads() - loadsBefore)));
                    }
                }
            }
        }
        return rows;
    }

    private Row report(Row row) {
        System.out.printf(Locale.ROOT, "lora bench: batch %d, %s, %d adapters in the batch, graphs %s: %.2f ms/step%n",
                row.batch, row.engine(), row.adapters, row.graphs ? "on" : "off", row.millisPerStep);
        return row;
    }

    /** A model of its own per engine over the shared weights (not closed: that would close the weights). */
    private LlamaEngine engine(LlamaWeights weights, ModelConfig config, EngineOptions options) {
        LlamaModel model = new LlamaModel(weights, device, DType.BF16, "random:" + seed);
        return new LlamaEngine(model, null, GenerationConfig.of(config), options, DType.BF16);
    }

    /** The decode bench's options for {@code c}: its batch, budget and a KV pool sized for it, graphs as it says. */
    private static EngineOptions options(DecodeBench.Case c) {
        int seqLen = c.context() + c.maxTokens();
        int pages = c.batch() * ((seqLen + PAGE - 1) / PAGE) + PAGE;
        return new EngineOptions(c.batch(), DecodeBench.TOKEN_BUDGET, KvCacheOptions.builder().maxSeqLen(seqLen)
                .maxNumPages(pages).pageSize(PAGE).prefixCache(false).build(), c.graphs());
    }

    static String adapterName(int i) {
        return "bench-" + (i + 1);
    }

    /**
     * {@code count} PEFT adapters of rank {@value #RANK} on {@link #MODULES} for {@code config} in {@code folder}: the
     * first with random weights, the others linking to its weights file with configs of their own alpha.
     */
    static void writeAdapters(Path folder, ModelConfig config, int count, long seed) throws IOException {
        RandomPeftAdapters.write(folder, config, new RandomPeftAdapters.Spec(adapterName(0), RANK, alpha(0), false,
                MODULES), seed);
        Path first = folder.resolve(adapterName(0));
        ObjectNode json = (ObjectNode) JSON.readTree(first.resolve(PeftAdapterConfig.FILE_NAME).toFile());
        for (int i = 1; i < count; i++) {
            Path dir = Files.createDirectories(folder.resolve(adapterName(i)));
            json.put("lora_alpha", alpha(i));
            JSON.writeValue(dir.resolve(PeftAdapterConfig.FILE_NAME).toFile(), json);
            Files.createSymbolicLink(dir.resolve(PeftAdapters.WEIGHTS_FILE), first.resolve(PeftAdapters.WEIGHTS_FILE));
        }
    }

    /** Scales near 1e-3: random A and B of 0.2 then add updates of the activations' order, not above it. */
    private static double alpha(int i) {
        return 0.02 + 0.0005 * i;
    }

    /** Per graphs setting, each row against the engine without adapters, with the {@value #TARGET}× bar. */
    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("| engine | adapters in the batch | batch | context | decode graphs | ms/step | tok/s | × base "
                + "| target ≥ ").append(String.format(Locale.ROOT, "%.2f", TARGET)).append("× | adapter loads |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            Row base = rows.stream().filter(b -> !b.served && b.graphs == r.graphs).findFirst().orElseThrow();
            double ratio = r.tokensPerSecond() / base.tokensPerSecond();
            String target = r.adapters == 0 ? "-" : ratio >= TARGET ? "met" : "missed";
            sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %s | %.2f | %.0f | %.3f | %s | %d |%n",
                    r.engine(), r.adapters, r.batch, r.context, r.graphs ? "on" : "off", r.millisPerStep,
                    r.tokensPerSecond(), ratio, target, r.loads));
        }
        return sb.toString();
    }
}
