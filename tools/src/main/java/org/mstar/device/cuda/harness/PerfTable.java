package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.mstar.device.Device;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;

/**
 * The engine's side of the one-call performance table (issue-style rows: prefill, decode and mixed steps on
 * Llama-3.1-8B and Llama-3.2-1B geometry), measured with {@link PrefillBench}, {@link DecodeBench} and
 * {@link MixedBench} and written as tab-separated rows that {@code perf_table.py} joins with a PyTorch peer, the
 * copy bandwidth and the bf16 GEMM rate of the same call. Each row carries the bytes a unit of its work must
 * read at least (weights, K/V) and the FLOPs it must do, so the bound is whichever of the two takes longer.
 * The unit is a step for decode and mixed rows and the whole batch of prompts for prefill rows.
 */
final class PerfTable {
    /** {prompt tokens, prompts}: 8192 tokens in each step below 16k. */
    static final int[][] PREFILL = {{512, 16}, {2048, 4}, {16384, 1}};
    static final List<DecodeBench.Case> DECODE_8B = decodeCases(new int[][] {
        {1, 512}, {16, 512}, {64, 512}, {128, 512}, {256, 512}, {512, 512}, {1024, 256}, {1, 4096}, {16, 4096},
        {64, 4096}, {1, 16384}, {16, 16384}});
    static final List<DecodeBench.Case> DECODE_1B = decodeCases(new int[][] {
        {1, 512}, {16, 512}, {64, 512}, {256, 512}, {1, 4096}, {16, 4096}, {64, 4096}, {256, 4096}, {1, 16384},
        {16, 16384}, {64, 16384}});
    /** 64 decodes at 512 keys while a 16k-token prompt is prefilled in 2048-token chunks. */
    static final List<MixedBench.Case> MIXED = List.of(new MixedBench.Case(64, 512, 16384, 2048));

    static final String HEADER = "kind\tmodel\tbatch\tcontext\tprompt\tchunk\tsteps\tengine_ms\ttokens\tbytes\tflops";

    private PerfTable() {}

    private static List<DecodeBench.Case> decodeCases(int[][] batchAndContext) {
        List<DecodeBench.Case> cases = new ArrayList<>();
        for (int[] bc : batchAndContext) {
            cases.add(new DecodeBench.Case(bc[0], bc[1], true));
        }
        return cases;
    }

    /** One line of the table's input. */
    record Line(String kind, String model, int batch, int context, int prompt, int chunk, int steps, double engineMillis,
                double tokens, double bytes, double flops) {
        String tsv() {
            return String.format(Locale.ROOT, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.1f\t%.6e\t%.6e", kind, model, batch,
                    context, prompt, chunk, steps, engineMillis, tokens, bytes, flops);
        }
    }

    /** Bytes of the weights a step of {@code rows} rows reads (all of a dense model's; a mixture of experts' routed). */
    static double weightBytes(ModelConfig c, double rows) {
        return ModelCost.weightBytesRead(c, rows);
    }

    static double kvBytesPerToken(ModelConfig c) {
        return ModelCost.kvBytesPerToken(c);
    }

    static double flops(ModelConfig c, double tokens, double sampled, double attendedKeys) {
        return ModelCost.flops(c, tokens, sampled, attendedKeys);
    }

    static List<Line> prefillLines(String model, ModelConfig c, List<PrefillBench.Row> rows) {
        return rows.stream().filter(PrefillBench.Row::tensorCores).map(r -> {
            double tokens = (double) r.prompt() * r.batch();
            double keys = r.batch() * (double) r.prompt() * (r.prompt() + 1) / 2;
            return new Line("prefill", model, r.batch(), 0, r.prompt(), PrefillBench.TOKEN_BUDGET, r.steps(),
                    r.millis(), tokens, weightBytes(c, tokens / r.steps()) * r.steps() + kvBytesPerToken(c) * tokens,
                    flops(c, tokens, r.batch(), keys));
        }).toList();
    }

    static List<Line> decodeLines(String model, ModelConfig c, List<DecodeBench.Row> rows) {
        return rows.stream().map(r -> {
            double keys = r.kvBytes() / kvBytesPerToken(c);
            return new Line("decode", model, r.c().batch(), r.c().context(), 0, 0, 1, r.millisPerStep(), r.c().batch(),
                    weightBytes(c, r.c().batch()) + r.kvBytes(), flops(c, r.c().batch(), r.c().batch(), keys));
        }).toList();
    }

    static List<Line> mixedLines(String model, ModelConfig c, List<MixedBench.Row> rows) {
        return rows.stream().map(r -> {
            double chunk = (double) r.c().prompt() / r.steps();
            // the chunks attend their cached prefix (on average half the prompt before them) and themselves causally
            double meanPrefix = (r.c().prompt() - chunk) / 2;
            double chunkKeys = chunk * (meanPrefix + (chunk + 1) / 2);
            double decodeKeys = r.c().decoders() * r.meanDecodeKeys();
            double bytes = weightBytes(c, r.tokensPerStep()) + kvBytesPerToken(c) * (decodeKeys + meanPrefix + chunk);
            return new Line("mixed", model, r.c().decoders(), r.c().context(), r.c().prompt(), r.c().chunk(), 1,
                    r.millisPerStep(), r.tokensPerStep(), bytes,
                    flops(c, r.tokensPerStep(), r.c().decoders(), decodeKeys + chunkKeys));
        }).toList();
    }

    /** A geometry's rows. */
    record Geometry(String name, ModelConfig config, int[][] prefill, List<DecodeBench.Case> decode,
                    List<MixedBench.Case> mixed) {}

    /** Llama-3.1-8B's and Llama-3.2-1B's geometry with the rows above. */
    static List<Geometry> geometries() {
        return List.of(new Geometry("8B", EngineBench.llama3_8b(), PREFILL, DECODE_8B, MIXED),
                new Geometry("1B", DecodeBench.llama32_1b(), PREFILL, DECODE_1B, MIXED));
    }

    /** Measures every row of {@code geometries} on {@code device}; returns the tab-separated table (header first). */
    static String measure(Device device, long seed, List<Geometry> geometries) {
        List<Line> lines = new ArrayList<>();
        for (Geometry g : geometries) {
            List<PrefillBench.Row> prefill = new PrefillBench(device, seed).run(g.config, g.config.numLayers(), g.prefill,
                    false);
            lines.addAll(prefillLines(g.name, g.config, prefill));
            lines.addAll(decodeLines(g.name, g.config, new DecodeBench(device, seed).run(g.name, g.config, g.decode)));
            lines.addAll(mixedLines(g.name, g.config, new MixedBench(device, seed).run(g.name, g.config, g.mixed)));
        }
        StringBuilder sb = new StringBuilder(HEADER).append('\n');
        lines.forEach(l -> sb.append(l.tsv()).append('\n'));
        return sb.toString();
    }
}
