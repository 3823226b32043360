package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.frame.FrameEngine;
import org.mstar.engine.frame.FrameInput;
import org.mstar.engine.frame.FrameResult;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVLayerConfig;

/**
 * Frame throughput of {@link FrameEngine} on the GPU: a random bf16 frame model steps every session's frame in
 * one batch, each session feeding its prediction back, with the rings full (every session past its horizon
 * before timing). Wall time per step includes the host's planning and the copy of the predicted tokens back.
 */
final class FrameBench {
    static final int WARMUP_STEPS = 12;
    static final int TIMED_STEPS = 10;

    record Row(int sessions, double msPerStep, double framesPerSecond, double tokensPerSecond) {}

    private final Device gpu;
    private final long seed;

    FrameBench(Device gpu, long seed) {
        this.gpu = gpu;
        this.seed = seed;
    }

    /** 8 layers of hidden 1024 (16/4 heads of 64), 256-token frames; layers alternate 8 frames at stride 1 and 4 at stride 2. */
    static FrameModelConfig geometry() {
        List<RingKVLayerConfig> layers = new ArrayList<>();
        for (int l = 0; l < 8; l++) layers.add(l % 2 == 0 ? new RingKVLayerConfig(8, 8, 1) : new RingKVLayerConfig(8, 4, 2));
        return new FrameModelConfig(1024, 1024, 16, 4, 64, 2816, 256, 16, 1e-5, 10000, layers);
    }

    List<Row> run(FrameModelConfig config, int[] sessionCounts) {
        List<Row> rows = new ArrayList<>();
        Random random = new Random(seed);
        try (FrameModel model = FrameModel.random(config, gpu, DType.BF16, seed)) {
            for (int sessions : sessionCounts) {
                try (FrameEngine engine = new FrameEngine(model, sessions)) {
                    int[][] current = new int[sessions][config.tokensPerFrame()];
                    for (int s = 0; s < sessions; s++) {
                        engine.open("s" + s);
                        for (int t = 0; t < config.tokensPerFrame(); t++) current[s][t] = random.nextInt(config.vocabSize());
                    }
                    int[] frame = {0};
                    Runnable step = () -> {
                        List<FrameInput> inputs = new ArrayList<>();
                        for (int s = 0; s < sessions; s++) {
                            inputs.add(new FrameInput("s" + s, frame[0], current[s], random.nextInt(config.numActions())));
                        }
                        List<FrameResult> out = engine.step(inputs, false);
                        for (int s = 0; s < sessions; s++) current[s] = out.get(s).tokens();
                        frame[0]++;
                    };
                    for (int i = 0; i < WARMUP_STEPS; i++) step.run();
                    long start = System.nanoTime();
                    for (int i = 0; i < TIMED_STEPS; i++) step.run();
                    double ms = (System.nanoTime() - start) / 1e6 / TIMED_STEPS;
                    double fps = sessions * 1000.0 / ms;
                    rows.add(new Row(sessions, ms, fps, fps * config.tokensPerFrame()));
                }
            }
        }
        return rows;
    }

    static String table(List<Row> rows) {
        StringBuilder sb = new StringBuilder("| sessions | ms / step | frames / s | tokens / s |\n|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %.2f | %.1f | %.0f |%n", r.sessions, r.msPerStep,
                    r.framesPerSecond, r.tokensPerSecond));
        }
        return sb.toString();
    }
}
