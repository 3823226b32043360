package org.mstar.engine.frame;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.data.Offset.offset;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.model.frame.FrameOutput;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.kv.ring.RingSessionState;

class FrameEngineTest {
    /** Three layers: every frame in 2 slots; every second frame in 2 of 3; every frame in 3 of 4. */
    static final FrameModelConfig CONFIG = new FrameModelConfig(48, 32, 4, 2, 8, 64, 128, 5, 1e-5, 10000,
            List.of(new RingKVLayerConfig(2, 2, 1), new RingKVLayerConfig(3, 2, 2), new RingKVLayerConfig(4, 3, 1)));

    private final CpuDevice device = new CpuDevice(2);
    /** Projections wide enough that every frame's prediction depends on the history it attends. */
    private final FrameModel model = FrameModel.random(CONFIG, device, DType.F32, 7, 0.5);

    @AfterEach
    void close() {
        model.close();
    }

    private static int[] randomFrame(Random r) {
        int[] t = new int[CONFIG.tokensPerFrame()];
        for (int i = 0; i < t.length; i++) t[i] = r.nextInt(CONFIG.vocabSize());
        return t;
    }

    @Test
    void batchedRingStepsEqualTheDenseReferenceThatKeepsEveryFrame() {
        DenseFrameAttention dense = new DenseFrameAttention(CONFIG, device, model.smScale());
        Random random = new Random(11);
        Map<String, int[]> current = new HashMap<>();
        Map<String, Integer> next = new HashMap<>();
        try (FrameEngine engine = new FrameEngine(model, 3)) {
            for (int step = 0; step < 9; step++) {
                // sessions open at different steps; c closes at step 5 and d takes its ring
                if (step == 0) open(engine, current, next, "a", random);
                if (step == 1) open(engine, current, next, "b", random);
                if (step == 2) open(engine, current, next, "c", random);
                if (step == 5) {
                    engine.close("c");
                    current.remove("c");
                    open(engine, current, next, "d", random);
                }
                List<FrameInput> inputs = new ArrayList<>();
                for (String s : current.keySet()) {
                    // most frames feed the prediction back; some are observed frames from outside
                    int[] tokens = random.nextInt(4) == 0 ? randomFrame(random) : current.get(s);
                    if (random.nextInt(5) > 0) inputs.add(new FrameInput(s, next.get(s), tokens, random.nextInt(5)));
                }
                List<FrameResult> got = engine.step(inputs, true);
                dense.frames(inputs);
                FrameOutput want = denseForward(inputs, dense);
                int tpf = CONFIG.tokensPerFrame();
                int vocab = CONFIG.vocabSize();
                for (int i = 0; i < inputs.size(); i++) {
                    FrameResult r = got.get(i);
                    assertThat(r.sessionId()).isEqualTo(inputs.get(i).sessionId());
                    assertThat(r.framePos()).isEqualTo(inputs.get(i).framePos() + 1);
                    for (int j = 0; j < tpf * vocab; j++) {
                        assertThat(r.logits()[j]).as("step %d %s logit %d", step, r.sessionId(), j)
                                .isCloseTo(want.logits()[i * tpf * vocab + j], offset(2e-4f));
                    }
                    for (int t = 0; t < tpf; t++) assertThat(r.tokens()[t]).isEqualTo(want.tokens()[i * tpf + t]);
                    current.put(r.sessionId(), r.tokens());
                    next.put(r.sessionId(), r.framePos());
                }
            }
        }
    }

    private FrameOutput denseForward(List<FrameInput> inputs, DenseFrameAttention dense) {
        int tpf = CONFIG.tokensPerFrame();
        int[] tokens = new int[inputs.size() * tpf];
        int[] actions = new int[inputs.size()];
        int[] positions = new int[inputs.size()];
        for (int i = 0; i < inputs.size(); i++) {
            System.arraycopy(inputs.get(i).tokens(), 0, tokens, i * tpf, tpf);
            actions[i] = inputs.get(i).action();
            positions[i] = inputs.get(i).framePos();
        }
        return model.forward(tokens, actions, positions, dense, true);
    }

    private static void open(FrameEngine engine, Map<String, int[]> current, Map<String, Integer> next, String s, Random r) {
        engine.open(s);
        current.put(s, randomFrame(r));
        next.put(s, 0);
    }

    @Test
    void aSnapshotRestoredIntoAnotherEngineContinuesExactly() {
        Random random = new Random(3);
        int[] first = randomFrame(random);
        List<int[]> uninterrupted = new ArrayList<>();
        List<int[]> resumed = new ArrayList<>();
        try (FrameEngine a = new FrameEngine(model, 2); FrameEngine b = new FrameEngine(model, 1)) {
            a.open("other");
            a.open("s");
            int[] tokens = first;
            RingSessionState snap = null;
            int[] atSnap = null;
            for (int fp = 0; fp < 7; fp++) {
                a.step(List.of(new FrameInput("other", fp, randomFrame(random), 1)), false);
                tokens = a.step(List.of(new FrameInput("s", fp, tokens, fp % 5)), false).get(0).tokens();
                if (fp >= 4) uninterrupted.add(tokens);
                if (fp == 3) {
                    snap = a.snapshot("s");
                    atSnap = tokens;
                }
            }
            b.restore("s", snap);
            assertThat(b.nextFrame("s")).isEqualTo(4);
            tokens = atSnap;
            for (int fp = 4; fp < 7; fp++) {
                tokens = b.step(List.of(new FrameInput("s", fp, tokens, fp % 5)), false).get(0).tokens();
                resumed.add(tokens);
            }
        }
        assertThat(resumed).containsExactlyElementsOf(uninterrupted);
    }

    @Test
    void replayingTheLastReplayDepthInputsIntoEmptyRingsContinuesExactly() {
        Random random = new Random(8);
        int depth = CONFIG.replayDepth();
        assertThat(depth).isEqualTo(3 * 4 + 1);
        int stepped = depth + 4;
        List<FrameInput> inputs = new ArrayList<>();
        List<float[]> uninterrupted = new ArrayList<>();
        try (FrameEngine a = new FrameEngine(model, 1)) {
            a.open("s");
            int[] tokens = randomFrame(random);
            for (int fp = 0; fp < stepped + 3; fp++) {
                // an observed frame now and then, so the replay must use the inputs as they were
                FrameInput in = new FrameInput("s", fp, fp % 6 == 5 ? randomFrame(random) : tokens, random.nextInt(5));
                inputs.add(in);
                FrameResult r = a.step(List.of(in), true).get(0);
                tokens = r.tokens();
                if (fp >= stepped) uninterrupted.add(r.logits());
            }
        }
        assertThat(replayed(inputs, stepped, depth)).containsExactlyElementsOf(uninterrupted);
        // one layer's reach is not enough: the deeper layers' keys still depend on frames before it
        assertThat(replayed(inputs, stepped, 5).get(0)).isNotEqualTo(uninterrupted.get(0));
    }

    /** Logits of the inputs from {@code stepped} on, after replaying the {@code replay} inputs before it into empty rings. */
    private List<float[]> replayed(List<FrameInput> inputs, int stepped, int replay) {
        List<float[]> out = new ArrayList<>();
        try (FrameEngine b = new FrameEngine(model, 1)) {
            b.openAt("s", stepped - replay);
            for (FrameInput in : inputs.subList(stepped - replay, stepped)) b.step(List.of(in), false);
            for (FrameInput in : inputs.subList(stepped, inputs.size())) out.add(b.step(List.of(in), true).get(0).logits());
        }
        return out;
    }

    @Test
    void badFramesAreRefusedWithoutTouchingTheRing() {
        try (FrameEngine engine = new FrameEngine(model, 1)) {
            engine.open("s");
            int[] frame = new int[CONFIG.tokensPerFrame()];
            assertThat(engine.refusal(new FrameInput("s", 1, frame, 0))).contains("expected frame 0, got 1");
            assertThat(engine.refusal(new FrameInput("s", 0, new int[3], 0))).contains("128 tokens");
            frame[5] = CONFIG.vocabSize();
            assertThat(engine.refusal(new FrameInput("s", 0, frame, 0))).contains("token id 48");
            frame[5] = 0;
            assertThat(engine.refusal(new FrameInput("s", 0, frame, 5))).contains("action 5");
            assertThat(engine.refusal(new FrameInput("x", 0, frame, 0))).contains("not open");
            assertThatThrownBy(() -> engine.step(List.of(new FrameInput("s", 2, frame, 0)), false))
                    .isInstanceOf(IllegalArgumentException.class);
            assertThat(engine.nextFrame("s")).isZero();
            assertThatThrownBy(() -> engine.open("t")).hasMessageContaining("resident sessions are taken");
            engine.step(List.of(new FrameInput("s", 0, frame, 0)), false);
            assertThat(engine.nextFrame("s")).isEqualTo(1);
        }
    }

    @Test
    void aSavedModelLoadsBackAndPredictsTheSame(@TempDir Path dir) throws Exception {
        model.weights().save(CONFIG, dir);
        int[] frame = randomFrame(new Random(5));
        try (FrameModel loaded = FrameModel.load(dir, device, DType.F32);
             FrameEngine a = new FrameEngine(model, 1); FrameEngine b = new FrameEngine(loaded, 1)) {
            assertThat(loaded.config()).isEqualTo(CONFIG);
            a.open("s");
            b.open("s");
            for (int fp = 0; fp < 3; fp++) {
                int[] x = a.step(List.of(new FrameInput("s", fp, frame, 2)), false).get(0).tokens();
                int[] y = b.step(List.of(new FrameInput("s", fp, frame, 2)), false).get(0).tokens();
                assertThat(y).isEqualTo(x);
                frame = x;
            }
        }
    }
}
