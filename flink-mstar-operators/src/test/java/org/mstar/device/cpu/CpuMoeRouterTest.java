package org.mstar.device.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.MoeRouting;
import org.mstar.device.Tensor;

/**
 * {@code moeRoute} against hand-computed choices: logits are logs of small integers, so softmax scores are those
 * integers over their sum. Covers OLMoE's and Qwen3-MoE's plain top k (with and without norm_topk_prob), ties,
 * DeepSeek-V2's group_limited_greedy with its routed scaling factor, and sigmoid scores.
 */
class CpuMoeRouterTest {
    private static final CpuDevice DEVICE = new CpuDevice(1);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    private record Routed(int[] ids, float[] weights) {}

    private static Routed route(MoeRouting routing, float[]... rows) {
        int experts = rows[0].length;
        float[] flat = new float[rows.length * experts];
        for (int r = 0; r < rows.length; r++) {
            System.arraycopy(rows[r], 0, flat, r * experts, experts);
        }
        int k = routing.topK();
        try (Tensor logits = DEVICE.fromFloats(flat, DType.F32, rows.length, experts);
             Tensor ids = DEVICE.allocate(DType.I32, rows.length, k);
             Tensor weights = DEVICE.allocate(DType.F32, rows.length, k)) {
            DEVICE.ops().moeRoute(logits, routing, ids, weights);
            return new Routed(DEVICE.toInts(ids), DEVICE.toFloats(weights));
        }
    }

    /** Logits whose softmax is {@code counts / Σ counts}. */
    private static float[] logOf(double... counts) {
        float[] l = new float[counts.length];
        for (int i = 0; i < l.length; i++) {
            l[i] = (float) Math.log(counts[i]);
        }
        return l;
    }

    @Test
    void softmaxTopKKeepsTheScoresUnlessNormalised() {
        float[] row = logOf(1, 2, 4, 1);
        Routed plain = route(MoeRouting.softmaxTopK(2, false), row);
        assertThat(plain.ids()).containsExactly(2, 1);
        assertThat(plain.weights()).containsExactly(new float[] {0.5f, 0.25f}, within(1e-6f));
        Routed normalised = route(MoeRouting.softmaxTopK(2, true), row);
        assertThat(normalised.ids()).containsExactly(2, 1);
        assertThat(normalised.weights()).containsExactly(new float[] {2 / 3f, 1 / 3f}, within(1e-6f));
    }

    @Test
    void tiesGoToTheLowerIndexAndRowsAreRoutedApart() {
        Routed r = route(MoeRouting.softmaxTopK(2, false), new float[] {1, 1, 1, 1}, logOf(1, 1, 3, 5));
        assertThat(r.ids()).containsExactly(0, 1, 3, 2);
        assertThat(r.weights()).containsExactly(new float[] {0.25f, 0.25f, 0.5f, 0.3f}, within(1e-6f));
    }

    /**
     * 8 experts in 4 groups of 2, scores 8, 1 | 2, 7 | 6, 6 | 3, 3 (of 36): the groups' best are 8, 7, 6, 3, so groups
     * 0 and 1 are kept and the top 3 are experts 0, 3, 2 — not expert 4 (6), the third best overall — each weight
     * multiplied by the routed scaling factor.
     */
    @Test
    void groupLimitedGreedyChoosesOnlyFromTheBestGroups() {
        float[] row = logOf(8, 1, 2, 7, 6, 6, 3, 3);
        Routed limited = route(new MoeRouting(MoeRouting.Scoring.SOFTMAX, 3, false, 4, 2, 16f), row);
        assertThat(limited.ids()).containsExactly(0, 3, 2);
        assertThat(limited.weights()).containsExactly(new float[] {16 * 8 / 36f, 16 * 7 / 36f, 16 * 2 / 36f},
                within(1e-5f));
        Routed free = route(new MoeRouting(MoeRouting.Scoring.SOFTMAX, 3, false, 1, 1, 16f), row);
        assertThat(free.ids()).containsExactly(0, 3, 4);
    }

    @Test
    void sigmoidScoresAreNormalisedThenScaled() {
        Routed r = route(new MoeRouting(MoeRouting.Scoring.SIGMOID, 2, true, 1, 1, 2.5f), new float[] {0, 2, -1, 1});
        double s2 = 1 / (1 + Math.exp(-2));
        double s1 = 1 / (1 + Math.exp(-1));
        assertThat(r.ids()).containsExactly(1, 3);
        assertThat(r.weights()).containsExactly(new float[] {(float) (2.5 * s2 / (s1 + s2)),
            (float) (2.5 * s1 / (s1 + s2))}, within(1e-6f));
    }

    @Test
    void groupsThatCannotHoldTheChoicesAreRefused() {
        assertThatThrownBy(() -> route(new MoeRouting(MoeRouting.Scoring.SOFTMAX, 2, false, 3, 1, 1f), new float[8]))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("8 experts in 3 groups");
        assertThatThrownBy(() -> route(new MoeRouting(MoeRouting.Scoring.SOFTMAX, 3, false, 4, 1, 1f), new float[8]))
                .hasMessageContaining("choosing 3 of the 1 best groups");
        assertThatThrownBy(() -> new MoeRouting(MoeRouting.Scoring.SOFTMAX, 2, false, 2, 3, 1f))
                .hasMessageContaining("topk_group");
    }
}
