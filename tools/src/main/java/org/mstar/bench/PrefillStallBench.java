package org.mstar.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.SchedulerOptions;
import org.mstar.engine.TokenOutput;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.SamplingReqConfig;

/**
 * How long a long prompt holds back running decodes, with and without the scheduler's prefill stall bound: eight
 * requests decode on the CPU engine (the benchmark's tiny Llama), a prompt of {@code args[0]} tokens (default
 * 1536) arrives, and the gaps between the decoders' tokens while it prefills are recorded. Prints, per setting,
 * the largest gap, the 99th percentile and the steps the prompt took to its first token.
 *
 * <pre>java -cp tools/target/benchmarks.jar org.mstar.bench.PrefillStallBench [promptTokens] [boundMillis]</pre>
 */
public final class PrefillStallBench {
    private PrefillStallBench() {}

    public static void main(String[] args) throws Exception {
        int promptTokens = args.length > 0 ? Integer.parseInt(args[0]) : 1536;
        long boundMillis = args.length > 1 ? Long.parseLong(args[1]) : 40;
        ModelConfig config = ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(256).intermediateSize(688).numLayers(4).numHeads(8).numKvHeads(4).headDim(32)
                .maxPositionEmbeddings(4096).vocabSize(4096).tieWordEmbeddings(true).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).build();
        Path dir = Files.createTempDirectory("mstar-stall");
        CheckpointWriter.writeRandom(config, DType.F32, 42, dir);
        System.out.printf("%-28s %12s %12s %12s %14s%n", "setting", "max gap ms", "p99 gap ms", "p50 gap ms",
                "prompt steps");
        try (CpuDevice device = new CpuDevice()) {
            for (int round = 0; round < 2; round++) { // the first round warms the JIT
                for (Duration bound : List.of(Duration.ZERO, Duration.ofMillis(boundMillis))) {
                    String name = bound.isZero() ? "token budget only" : "max-prefill-stall " + boundMillis + " ms";
                    Result r = run(dir, device, promptTokens, bound);
                    if (round == 1) {
                        System.out.printf("%-28s %12.1f %12.1f %12.1f %14d%n", name, r.maxMs, r.p99Ms, r.p50Ms,
                                r.promptSteps);
                    }
                }
            }
        }
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    private record Result(double maxMs, double p99Ms, double p50Ms, int promptSteps) {}

    private static Result run(Path dir, CpuDevice device, int promptTokens, Duration bound) throws Exception {
        EngineOptions options = new EngineOptions(16, 4096, KvCacheOptions.builder().maxSeqLen(4096).maxNumPages(2048)
                .prefixCache(false).build(), false,
                SchedulerOptions.DEFAULTS.withMaxPrefillStall(bound));
        Random rnd = new Random(7);
        try (LlamaEngine engine = LlamaEngineLoader.load(dir, device, options)) {
            for (int i = 0; i < 8; i++) {
                engine.submit(request("d" + i, prompt(rnd, 32), 400));
            }
            Map<String, Long> last = new HashMap<>();
            for (int i = 0; i < 30; i++) { // decoders running, the step-cost estimate warm
                engine.step().tokens().forEach(t -> last.put(t.requestId(), System.nanoTime()));
            }
            engine.submit(request("long", prompt(rnd, promptTokens), 1));
            List<Long> gaps = new ArrayList<>();
            int steps = 0;
            boolean longDone = false;
            while (!longDone) {
                List<TokenOutput> tokens = engine.step().tokens();
                long now = System.nanoTime();
                steps++;
                for (TokenOutput t : tokens) {
                    if (t.requestId().equals("long")) {
                        longDone = true;
                        continue;
                    }
                    Long before = last.put(t.requestId(), now);
                    if (before != null) {
                        gaps.add(now - before);
                    }
                }
            }
            gaps.sort(null);
            return new Result(ms(gaps.get(gaps.size() - 1)), ms(gaps.get((int) (gaps.size() * 0.99))),
                    ms(gaps.get(gaps.size() / 2)), steps);
        }
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    private static int[] prompt(Random rnd, int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) {
            p[i] = 2 + rnd.nextInt(4000);
        }
        return p;
    }

    private static GenerationRequest request(String id, int[] prompt, int maxTokens) {
        return GenerationRequest.builder(id).promptTokenIds(prompt)
                .sampling(SamplingReqConfig.DEFAULTS.withSeed(id.hashCode())).maxTokens(maxTokens).ignoreEos(true)
                .build();
    }
}
