package org.mstar.resources.attn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.BucketKey;
import org.mstar.resources.RaggedAttentionConfig;
import org.mstar.resources.RaggedAttnBackend;
import org.mstar.resources.RaggedCrossAttentionStep;
import org.mstar.resources.RaggedCrossAttentionStep.Pair;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;

/**
 * Ragged (cacheless) attention, through the manager's plan and run, equals dense attention over each span's
 * full matrices with the mask: packed spans of different lengths, grouped-query heads, bidirectional, causal,
 * block-causal and cross pairs; capture padding rows leave real rows' outputs as they were.
 */
class RaggedAttentionManagerTest {
    private static final int QO_HEADS = 4;
    private static final int KV_HEADS = 2;
    private static final int HEAD_DIM = 8;
    private static final float TOLERANCE = 1e-5f;

    private final Random random = new Random(14);

    private static RaggedAttentionConfig config(int qoHeads, int kvHeads) {
        return new RaggedAttentionConfig(qoHeads, kvHeads, HEAD_DIM, null, 2, null, RaggedAttnBackend.AUTO);
    }

    private static List<Segment> segments(String label, int... spans) {
        List<Segment> segs = new ArrayList<>();
        for (int r = 0; r < spans.length; r++) {
            segs.add(new Segment("r" + r, label, spans[r]));
        }
        return segs;
    }

    private static StepContext ctx(List<Segment> segs) {
        return new StepContext(segs.stream().map(Segment::requestId).distinct().toList(), "encode", 0, false);
    }

    /**
     * Random q, k and v over {@code spans} packed, attended by {@code label}'s planned step as self-attention, equal
     * dense attention per span under {@code mask}.
     */
    private void assertSelfAttentionIsDense(CpuDevice device, RaggedAttentionManager attn, String label, int[] spans,
                                            int qoHeads, int kvHeads, DenseAttention.Mask mask) {
        int tokens = Arrays.stream(spans).sum();
        float[] q = randoms(tokens * qoHeads * HEAD_DIM);
        float[] k = randoms(tokens * kvHeads * HEAD_DIM);
        float[] v = randoms(tokens * kvHeads * HEAD_DIM);

        float[] actual = run(device, attn, label, q, k, v, qoHeads, kvHeads);

        assertClose(actual, DenseAttention.attend(q, k, v, spans, spans, qoHeads, kvHeads, HEAD_DIM, mask), TOLERANCE);
    }

    private float[] randoms(int n) {
        return Gaussians.draw(random, n);
    }

    /** Runs {@code label} of the manager's current plan on q, k, v in F32 and returns the output. */
    private static float[] run(CpuDevice device, RaggedAttentionManager attn, String label, float[] q, float[] k,
                               float[] v, int qoHeads, int kvHeads) {
        int qRows = q.length / (qoHeads * HEAD_DIM);
        int kvRows = k.length / (kvHeads * HEAD_DIM);
        Tensor out = device.zeros(DType.F32, qRows, qoHeads, HEAD_DIM);
        attn.run(device.fromFloats(q, DType.F32, qRows, qoHeads, HEAD_DIM),
                device.fromFloats(k, DType.F32, kvRows, kvHeads, HEAD_DIM),
                device.fromFloats(v, DType.F32, kvRows, kvHeads, HEAD_DIM), label, out);
        return device.toFloats(out);
    }

    private static void assertClose(float[] actual, float[] expected, float tolerance) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.length; i++) {
            assertThat(Math.abs(actual[i] - expected[i])).as("element %d: %s vs %s", i, actual[i], expected[i])
                    .isLessThanOrEqualTo(tolerance);
        }
    }

    @ParameterizedTest(name = "causal={0}")
    @ValueSource(booleans = {false, true})
    void selfAttentionOfPackedSpansEqualsDenseAttentionPerSpan(boolean causal) {
        int[] spans = {5, 1, 9, 3};
        try (CpuDevice device = new CpuDevice(2)) {
            RaggedAttentionManager attn = RaggedAttentionManager.self(config(QO_HEADS, KV_HEADS), device);
            List<Segment> segs = segments("audio", spans);
            RaggedAttentionPlans plans = attn.plan(new AttentionStep(segs, causal, false), ctx(segs));
            assertThat(plans.requestIds("audio")).containsExactly("r0", "r1", "r2", "r3");
            assertSelfAttentionIsDense(device, attn, "audio", spans, QO_HEADS, KV_HEADS,
                    causal ? DenseAttention.CAUSAL : DenseAttention.FULL);
        }
    }

    @Test
    void blockCausalAttentionSeesItsOwnBlockAndEveryEarlierOne() {
        int block = 3;
        int[] spans = {7, 4, 10, 3};
        try (CpuDevice device = new CpuDevice(2)) {
            RaggedAttentionManager attn = RaggedAttentionManager.blockCausal(config(QO_HEADS, KV_HEADS), block, device);
            List<Segment> segs = segments("frames", spans);
            attn.plan(new AttentionStep(segs, false, false), ctx(segs));
            assertSelfAttentionIsDense(device, attn, "frames", spans, QO_HEADS, KV_HEADS,
                    DenseAttention.blockCausal(block));
            assertThatThrownBy(() -> attn.plan(new AttentionStep(segs, true, false), ctx(segs)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("causal=false");
        }
    }

    @Test
    void crossPairsAttendTheirRequestsOtherSpanWithoutMask() {
        int[] textSpans = {2, 6, 1};
        int[] imageSpans = {5, 3, 8};
        List<Segment> segs = new ArrayList<>(segments("text", textSpans));
        segs.addAll(segments("image", imageSpans));
        int qTokens = Arrays.stream(textSpans).sum();
        int kvTokens = Arrays.stream(imageSpans).sum();
        try (CpuDevice device = new CpuDevice(2)) {
            RaggedAttentionManager attn = RaggedAttentionManager.cross(config(QO_HEADS, KV_HEADS), device);
            RaggedAttentionPlans plans = attn.plan(new RaggedCrossAttentionStep(segs, List.of(new Pair("text", "image"))),
                    ctx(segs));
            String label = RaggedCrossAttentionStep.crossLabel("text", "image");
            assertThat(plans.labels()).containsExactly(label);
            float[] q = randoms(qTokens * QO_HEADS * HEAD_DIM);
            float[] k = randoms(kvTokens * KV_HEADS * HEAD_DIM);
            float[] v = randoms(kvTokens * KV_HEADS * HEAD_DIM);

            float[] actual = run(device, attn, label, q, k, v, QO_HEADS, KV_HEADS);

            assertClose(actual, DenseAttention.attend(q, k, v, textSpans, imageSpans, QO_HEADS, KV_HEADS, HEAD_DIM,
                    DenseAttention.FULL), TOLERANCE);
            assertThatThrownBy(() -> attn.run(device.zeros(DType.F32, qTokens, QO_HEADS, HEAD_DIM),
                    device.zeros(DType.F32, kvTokens, KV_HEADS, HEAD_DIM),
                    device.zeros(DType.F32, kvTokens, KV_HEADS, HEAD_DIM), "text",
                    device.zeros(DType.F32, qTokens, QO_HEADS, HEAD_DIM)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no ragged attention planned");
        }
    }

    @Test
    void crossPairsNeedTheSameRequestsInTheSameOrderAndDeclaredLabels() {
        List<Segment> segs = List.of(new Segment("a", "text", 2), new Segment("b", "text", 1),
                new Segment("b", "image", 3), new Segment("a", "image", 4));
        try (CpuDevice device = new CpuDevice(1)) {
            RaggedAttentionManager attn = RaggedAttentionManager.cross(config(QO_HEADS, KV_HEADS), device);
            assertThatThrownBy(() -> attn.plan(new RaggedCrossAttentionStep(segs, List.of(new Pair("text", "image"))),
                    ctx(segs))).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("same order");
            assertThatThrownBy(() -> attn.plan(new RaggedCrossAttentionStep(segs, List.of(new Pair("text", "audio"))),
                    ctx(segs))).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'audio'");
        }
    }

    @ParameterizedTest(name = "leased={0}")
    @ValueSource(booleans = {false, true})
    void paddingRowsDoNotChangeRealRowsOutputs(boolean leased) {
        int[] spans = {6, 2, 5};
        int[] padded = {6, 2, 5, 4, 4};
        int realTokens = Arrays.stream(spans).sum();
        int bucketTokens = 32;
        try (CpuDevice device = new CpuDevice(2)) {
            RaggedAttentionManager attn = RaggedAttentionManager.self(config(QO_HEADS, KV_HEADS), device);
            float[] q = randoms(bucketTokens * QO_HEADS * HEAD_DIM);
            float[] k = randoms(bucketTokens * KV_HEADS * HEAD_DIM);
            float[] v = randoms(bucketTokens * KV_HEADS * HEAD_DIM);
            List<Segment> real = segments("audio", spans);
            attn.plan(new AttentionStep(real, false, false), ctx(real));
            int qWidth = QO_HEADS * HEAD_DIM;
            int kvWidth = KV_HEADS * HEAD_DIM;
            float[] alone = run(device, attn, "audio", Arrays.copyOf(q, realTokens * qWidth),
                    Arrays.copyOf(k, realTokens * kvWidth), Arrays.copyOf(v, realTokens * kvWidth), QO_HEADS, KV_HEADS);

            List<Segment> withPadding = segments("audio", padded);
            StepContext ctx = ctx(real);
            ctx.setPaddedRequestIds(withPadding.stream().map(Segment::requestId).toList());
            int paddedTokens = Arrays.stream(padded).sum();
            if (leased) {
                ctx.setSlotLease(new SlotLease(1, new BucketKey("encode", padded.length, bucketTokens)));
            }
            attn.plan(new AttentionStep(withPadding, false, false), ctx);
            int rows = leased ? bucketTokens : paddedTokens;
            float[] together = run(device, attn, "audio", Arrays.copyOf(q, rows * qWidth),
                    Arrays.copyOf(k, rows * kvWidth), Arrays.copyOf(v, rows * kvWidth), QO_HEADS, KV_HEADS);

            assertThat(Arrays.copyOf(together, alone.length)).containsExactly(alone);
            if (leased) {
                // rows past the planned tokens are the bucket's slack: not written
                assertThat(Arrays.copyOfRange(together, paddedTokens * qWidth, together.length)).containsOnly(0f);
            }
        }
    }

    @Test
    void bf16AttentionStaysWithinTheBf16BandOfTheDenseReference() {
        int[] spans = {64, 17, 33};
        int tokens = Arrays.stream(spans).sum();
        try (CpuDevice device = new CpuDevice(2)) {
            RaggedAttentionManager attn = RaggedAttentionManager.self(config(QO_HEADS, KV_HEADS), device);
            List<Segment> segs = segments("audio", spans);
            attn.plan(new AttentionStep(segs, true, false), ctx(segs));
            Tensor q = device.fromFloats(randoms(tokens * QO_HEADS * HEAD_DIM), DType.BF16, tokens, QO_HEADS, HEAD_DIM);
            Tensor k = device.fromFloats(randoms(tokens * KV_HEADS * HEAD_DIM), DType.BF16, tokens, KV_HEADS, HEAD_DIM);
            Tensor v = device.fromFloats(randoms(tokens * KV_HEADS * HEAD_DIM), DType.BF16, tokens, KV_HEADS, HEAD_DIM);
            Tensor out = device.zeros(DType.BF16, tokens, QO_HEADS, HEAD_DIM);

            attn.run(q, k, v, "audio", out);

            float[] expected = DenseAttention.attend(device.toFloats(q), device.toFloats(k), device.toFloats(v), spans,
                    spans, QO_HEADS, KV_HEADS, HEAD_DIM, DenseAttention.CAUSAL);
            assertClose(device.toFloats(out), expected, 2e-2f);
        }
    }

    /** Any packing of spans (empty ones included), head grouping and mask gives the dense result. */
    @Property(tries = 40)
    void anyPackingEqualsDenseAttention(@ForAll @Size(min = 1, max = 5) List<@IntRange(min = 0, max = 12) Integer> spanList,
                                        @ForAll @IntRange(min = 0, max = 2) int groupLog,
                                        @ForAll @IntRange(min = 0, max = 4) int block) {
        int[] spans = spanList.stream().mapToInt(Integer::intValue).toArray();
        int kvHeads = 2;
        int qoHeads = kvHeads << groupLog;
        try (CpuDevice device = new CpuDevice(1)) {
            RaggedAttentionManager attn = block == 0
                    ? RaggedAttentionManager.self(config(qoHeads, kvHeads), device)
                    : RaggedAttentionManager.blockCausal(config(qoHeads, kvHeads), block, device);
            List<Segment> segs = segments("x", spans);
            attn.plan(new AttentionStep(segs, false, false), ctx(segs));
            assertSelfAttentionIsDense(device, attn, "x", spans, qoHeads, kvHeads,
                    block == 0 ? DenseAttention.FULL : DenseAttention.blockCausal(block));
        }
    }
}
