package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.StepTimings;
import org.mstar.engine.StepTimings.Phase;
import org.mstar.engine.WhisperEngine;
import org.mstar.engine.WhisperEngineLoader;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;
import org.mstar.model.whisper.WhisperWeights;

/**
 * Whisper serving throughput on random bf16 weights of a real geometry: per batch size, that many 30-second
 * requests (uniform noise, language given) submitted together; the first step encodes every window (host log-mel
 * features included) and feeds the prompts; then {@value #DECODE_STEPS} steps (fewer under a kernel profiler) in
 * which every request decodes one token, after {@value #WARMUP_STEPS} untimed ones. Times are wall clock around {@code step()}, which returns once
 * the sampled tokens are on the host. With decode graphs each decode step is one graph replay of its batch bucket
 * (recorded at the first step of the bucket, a warm-up one), planned while the step before runs. The decode bound is the bytes one decode step must read (the decoder's
 * weights, the embedding gathered and used as the output projection, and the self- and cross-attention K/V) at the
 * copy bandwidth given.
 */
final class WhisperBench {
    static final int DECODE_STEPS = 32;
    private static final int WARMUP_STEPS = 2;
    private static final int PAGE = 16;

    /**
     * @param hostMillisPerStep the engine's host time of a decode step outside its wait for the device (schedule,
     *     admit and plan, launch, commit, pre-plan, accept: {@link StepTimings})
     * @param waitMillisPerStep the host's wait for the step's tokens: device time the host work did not cover
     */
    record Row(String model, int batch, boolean graphs, int active, double encodeStepMillis,
               double decodeMillisPerStep, double hostMillisPerStep, double waitMillisPerStep, long boundBytes) {
        double decodeTokensPerSecond() {
            return active / (decodeMillisPerStep / 1e3);
        }
    }

    private final Device device;
    private final long seed;
    private final int decodeSteps;

    WhisperBench(Device device, long seed, int decodeSteps) {
        this.device = device;
        this.seed = seed;
        this.decodeSteps = decodeSteps;
    }

    /** Eager decode steps at every batch size of {@code batches}, then with decode graphs at those of {@code graphed}. */
    List<Row> run(String name, WhisperConfig config, int[] batches, int[] graphed) {
        List<Row> rows = new ArrayList<>();
        try (WhisperWeights weights = WhisperWeights.random(config, device, DType.BF16, seed)) {
            for (int batch : batches) {
                rows.add(run(name, config, weights, batch, false));
            }
            for (int batch : graphed) {
                rows.add(run(name, config, weights, batch, true));
            }
        }
        return rows;
    }

    private Row run(String name, WhisperConfig config, WhisperWeights weights, int batch, boolean graphs) {
        int pagesPerRequest = (config.encoderFrames() + PAGE - 1) / PAGE + (config.maxTargetPositions() + PAGE - 1) / PAGE;
        WhisperEngine engine = new WhisperEngine(new WhisperModel(weights, DType.BF16), null,
                WhisperEngineLoader.logMel(config.numMelBins()),
                new WhisperEngineOptions(batch, batch * pagesPerRequest + 1, PAGE, 0, graphs), DType.BF16);
        try {
            SplittableRandom random = new SplittableRandom(seed + batch);
            for (int r = 0; r < batch; r++) {
                float[] audio = new float[30 * AudioInput.SAMPLE_RATE];
                for (int i = 0; i < audio.length; i++) {
                    audio[i] = (float) (0.2 * (random.nextDouble() - 0.5));
                }
                engine.submit(GenerationRequest.builder("w" + r)
                        .audio(new AudioInput(audio, "en", "transcribe", false)).maxTokens(400).build());
            }
            long start = System.nanoTime();
            engine.step();
            double encodeMillis = (System.nanoTime() - start) / 1e6;
            for (int i = 0; i < WARMUP_STEPS; i++) {
                engine.step();
            }
            int active = engine.stats().running();
            StepTimings timings = engine.stepTimings();
            timings.reset();
            start = System.nanoTime();
            int tokens = 0;
            for (int i = 0; i < decodeSteps; i++) {
                StepResult r = engine.step();
                tokens += r.tokens().size();
            }
            double perStep = (System.nanoTime() - start) / 1e6 / decodeSteps;
            double wait = timings.millisPerStep(Phase.WAIT);
            double host = timings.millisPerStep().values().stream().mapToDouble(Double::doubleValue).sum() - wait;
            int meanActive = Math.round((float) tokens / decodeSteps);
            long d = config.dModel();
            long layerWeights = 4 * d * d + 2 * d * config.decoderFfn() + 2 * d * d; // self q/k/v/o, MLP, cross q/o
            int context = 4 + WARMUP_STEPS + decodeSteps / 2;
            long kvBytes = (long) batch * config.decoderLayers() * 2 * d * (config.encoderFrames() + context) * 2;
            long bound = config.decoderLayers() * layerWeights * 2 + config.vocabSize() * d * 2 + kvBytes;
            if (graphs && engine.decodeGraphReplays() < decodeSteps) {
                throw new IllegalStateException("only " + engine.decodeGraphReplays() + " decode steps were graph"
                        + " replays");
            }
            return new Row(name, batch, graphs, Math.max(active, meanActive), encodeMillis, perStep, host, wait, bound);
        } finally {
            engine.close();
        }
    }

    static String table(List<Row> rows, double peakTbPerS) {
        StringBuilder sb = new StringBuilder("| model | batch | decode graphs | requests decoding | first step (encode "
                + "+ prompt) ms | decode ms/step | host ms/step | wait for device ms/step | decode tokens/s | "
                + "bytes-read bound ms/step |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %d | %s | %d | %.1f | %.2f | %.2f | %.2f | %.0f | %.3f |%n",
                    r.model(), r.batch(), r.graphs() ? "on" : "off", r.active(), r.encodeStepMillis(),
                    r.decodeMillisPerStep(), r.hostMillisPerStep(), r.waitMillisPerStep(), r.decodeTokensPerSecond(),
                    r.boundBytes() / (peakTbPerS * 1e12) * 1e3));
        }
        return sb.toString();
    }
}
