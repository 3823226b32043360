package org.mstar.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.StepResult;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.SamplingReqConfig;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One engine decode step on the CPU for the bundled tiny Llama geometry (hidden 256, 4 layers, vocab
 * 4096) with {@code batch} running requests of 128-token prompts: the whole path (scheduling, admit,
 * plan, forward, sampling, commit). Requests are topped up so every step decodes the full batch.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class EngineStepBenchmark {
    @Param({"1", "16"})
    int batch;

    private Path dir;
    private CpuDevice device;
    private LlamaEngine engine;
    private int next;
    private final Random rnd = new Random(3);

    @Setup(Level.Trial)
    public void setup() throws IOException {
        ModelConfig config = ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(256).intermediateSize(688).numLayers(4).numHeads(8).numKvHeads(4).headDim(32)
                .maxPositionEmbeddings(2048).vocabSize(4096).tieWordEmbeddings(true).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).build();
        dir = Files.createTempDirectory("mstar-bench");
        CheckpointWriter.writeRandom(config, DType.F32, 42, dir);
        device = new CpuDevice();
        engine = LlamaEngineLoader.load(dir, device, new EngineOptions(batch, 4096,
                KvCacheOptions.builder().maxSeqLen(2048).maxNumPages(4096).prefixCache(false).build()));
        for (int i = 0; i < batch; i++) {
            submit();
        }
        while (engine.waiting() > 0) {
            engine.step();
        }
    }

    private void submit() {
        int[] prompt = new int[128];
        for (int i = 0; i < prompt.length; i++) {
            prompt[i] = 2 + rnd.nextInt(4000);
        }
        engine.submit(GenerationRequest.builder("b" + next++).promptTokenIds(prompt)
                .sampling(SamplingReqConfig.DEFAULTS.withSeed(next)).maxTokens(1_000_000).ignoreEos(true).build());
    }

    @Benchmark
    public StepResult decodeStep() {
        StepResult r = engine.step();
        // a request that reached the context's end is replaced, so the batch stays full
        r.finished().forEach(f -> submit());
        return r;
    }

    @TearDown(Level.Trial)
    public void close() throws IOException {
        engine.close();
        device.close();
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}
