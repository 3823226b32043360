package org.mstar.device.cuda.harness;

import java.util.ArrayList;
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
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.RandomWeights;

/**
 * Mixed steps: {@code decoders} requests decode at about {@code context} keys while one prompt of {@code prompt}
 * tokens arrives and is prefilled in chunks. The token budget is {@code chunk + decoders}, so every step carries
 * each decode row and one chunk of the prompt (chunks after the first attend to the prompt's cached prefix). The
 * time is wall clock over the steps from the prompt's arrival to its first token, divided by the steps; each row
 * is the second of two identical prompts (the first meets the step shapes first).
 */
final class MixedBench {
    private static final int WARMUP_STEPS = 3;
    private static final int PAGE = 16;

    /** One measured shape. */
    record Case(int decoders, int context, int prompt, int chunk) {
        int chunks() {
            return (prompt + chunk - 1) / chunk;
        }

        /**
         * Tokens each decoder may draw: one per step of the decoders' own prefill (at least {@code chunk} prompt
         * tokens a step), the warm-up and both prompts' steps, with room.
         */
        int decoderTokens() {
            return (int) ((long) decoders * context / chunk) + WARMUP_STEPS + 2 * (chunks() + 2) + 4;
        }
    }

    /**
     * @param millisPerStep mean wall time of a step that carries the decode rows and a chunk
     * @param steps steps the prompt took to its first token
     * @param meanDecodeKeys keys a decode row attended, averaged over those steps
     */
    record Row(String model, Case c, double millisPerStep, int steps, double meanDecodeKeys) {
        /** Tokens a step computed on average: every decode row and the prompt's share. */
        double tokensPerStep() {
            return c.decoders + (double) c.prompt / steps;
        }

        double tokensPerSecond() {
            return tokensPerStep() / (millisPerStep / 1e3);
        }
    }

    private final Device device;
    private final long seed;
    private int runs;

    MixedBench(Device device, long seed) {
        this.device = device;
        this.seed = seed;
    }

    /** Every case on random bf16 weights of {@code config}, one engine per case. */
    List<Row> run(String name, ModelConfig config, List<Case> cases) {
        List<Row> rows = new ArrayList<>();
        LlamaWeights weights = RandomWeights.create(config, device, DType.BF16, seed);
        try (LlamaModel model = new LlamaModel(weights, DType.BF16, "random:" + seed)) {
            for (Case c : cases) {
                int maxSeqLen = Math.max(c.context + c.decoderTokens(), c.prompt + 2);
                int pages = c.decoders * ((c.context + c.decoderTokens() + PAGE - 1) / PAGE)
                        + 2 * ((c.prompt + 2 + PAGE - 1) / PAGE) + PAGE;
                EngineOptions options = new EngineOptions(c.decoders + 1, c.chunk + c.decoders,
                        KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(PAGE)
                                .prefixCache(false).build(), true);
                try (LlamaEngine engine = new LlamaEngine(model, null, GenerationConfig.of(config), options,
                        DType.BF16)) {
                    Row row = measure(engine, name, config, c);
                    System.out.printf(Locale.ROOT, "mixed bench: %s, %d decoders at %d keys + %d-token prompt in "
                            + "%d-token chunks: %.2f ms/step%n", name, c.decoders, c.context, c.prompt, c.chunk,
                            row.millisPerStep);
                    rows.add(row);
                }
            }
        }
        return rows;
    }

    private Row measure(LlamaEngine engine, String name, ModelConfig config, Case c) {
        Random rnd = new Random(seed + c.decoders * 31L + c.prompt);
        runs++;
        for (int i = 0; i < c.decoders; i++) {
            engine.submit(BenchRequests.greedy("mixed" + runs + "-d" + i, BenchRequests.randomPrompt(rnd, config, c.context), c.decoderTokens()));
        }
        Set<String> started = new HashSet<>();
        int decodeKeys = c.context;
        while (started.size() < c.decoders) {
            BenchRequests.step(engine).tokens().forEach(t -> started.add(t.requestId()));
        }
        for (int i = 0; i < WARMUP_STEPS; i++) {
            BenchRequests.step(engine);
            decodeKeys++;
        }
        Row row = null;
        for (int pass = 0; pass < 2; pass++) {
            String id = "mixed" + runs + "-p" + pass;
            engine.submit(BenchRequests.greedy(id, BenchRequests.randomPrompt(rnd, config, c.prompt), 2));
            int steps = 0;
            long keySum = 0;
            long start = System.nanoTime();
            boolean first = false;
            while (!first) {
                StepResult r = BenchRequests.step(engine);
                steps++;
                keySum += decodeKeys++;
                first = r.tokens().stream().anyMatch(t -> t.requestId().equals(id));
                long decoded = r.tokens().stream().filter(t -> !t.requestId().equals(id)).count();
                if (decoded != c.decoders) {
                    throw new IllegalStateException("a mixed step decoded " + decoded + " of " + c.decoders + " rows");
                }
            }
            double millis = (System.nanoTime() - start) / 1e6 / steps;
            engine.remove(id);
            row = new Row(name, c, millis, steps, (double) keySum / steps);
        }
        return row;
    }

    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder("| model | decoders | decode keys | prompt tokens | chunk | steps | ms/step "
                + "| tokens/step | tok/s |\n|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %.0f | %d | %d | %d | %.2f | %.0f | %.0f |%n", r.model,
                    r.c.decoders, r.meanDecodeKeys, r.c.prompt, r.c.chunk, r.steps, r.millisPerStep, r.tokensPerStep(),
                    r.tokensPerSecond()));
        }
        return sb.toString();
    }
}
