package org.mstar.model.moe;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.MoeRouting;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.MoeConfig;

/**
 * A sparse layer's MLP against a plain loop over its definition: router logits, DeepSeek-V2's group-limited routing
 * with a routed scaling factor, the chosen experts' SiLU-gated MLPs weighed and summed, plus the shared experts'
 * dense gated MLP (DeepSeek's {@code n_shared_experts}, here two side by side).
 */
class MoeMlpTest {
    private static final CpuDevice DEVICE = new CpuDevice(1);
    private static final int H = 12;
    private static final int E = 8;
    private static final int I = 6;
    private static final int SHARED = 2 * I;
    private static final MoeRouting ROUTING = new MoeRouting(MoeRouting.Scoring.SOFTMAX, 3, false, 4, 2, 2.5f);

    @AfterAll
    static void close() {
        DEVICE.close();
    }

    private static float[] random(Random rnd, int n, double scale) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (rnd.nextGaussian() * scale);
        }
        return v;
    }

    @Test
    void routedAndSharedExpertsMatchTheirDefinition() {
        Random rnd = new Random(3);
        int rows = 5;
        float[] x = random(rnd, rows * H, 1);
        float[] router = random(rnd, E * H, 0.5);
        float[] gateUp = random(rnd, E * 2 * I * H, 0.3);
        float[] down = random(rnd, E * H * I, 0.3);
        float[] sharedGateUp = random(rnd, 2 * SHARED * H, 0.3);
        float[] sharedDown = random(rnd, H * SHARED, 0.3);
        List<Tensor> temporaries = new ArrayList<>();
        float[] got;
        try (Tensor xs = DEVICE.fromFloats(x, DType.F32, rows, H);
             Tensor r = DEVICE.fromFloats(router, DType.F32, E, H);
             Tensor gu = DEVICE.fromFloats(gateUp, DType.F32, E, 2 * I, H);
             Tensor dn = DEVICE.fromFloats(down, DType.F32, E, H, I);
             Tensor sgu = DEVICE.fromFloats(sharedGateUp, DType.F32, 2 * SHARED, H);
             Tensor sdn = DEVICE.fromFloats(sharedDown, DType.F32, H, SHARED);
             Tensor out = DEVICE.allocate(DType.F32, rows, H)) {
            MoeConfig moe = new MoeConfig(E, I, ROUTING, List.of(true));
            new MoeMlp(DEVICE, moe, rows, DType.F32, temporaries).run(xs,
                    new MoeLayerWeights(r, gu, dn, new MoeLayerWeights.SharedExperts(sgu, sdn)), out);
            got = DEVICE.toFloats(out);
        } finally {
            temporaries.forEach(Tensor::close);
        }
        for (int row = 0; row < rows; row++) {
            float[] xr = Arrays.copyOfRange(x, row * H, (row + 1) * H);
            double[] want = gatedMlp(xr, sharedGateUp, 0, sharedDown, 0, SHARED);
            double[] scores = new double[E];
            double sum = 0;
            for (int e = 0; e < E; e++) {
                scores[e] = Math.exp(dot(xr, router, e * H));
                sum += scores[e];
            }
            for (int e = 0; e < E; e++) {
                scores[e] /= sum;
            }
            for (int e : chosen(scores)) {
                double[] y = gatedMlp(xr, gateUp, e * 2 * I * H, down, e * H * I, I);
                for (int o = 0; o < H; o++) {
                    want[o] += ROUTING.routedScalingFactor() * scores[e] * y[o];
                }
            }
            for (int o = 0; o < H; o++) {
                assertThat((double) got[row * H + o]).as("row %d output %d", row, o).isCloseTo(want[o], within(1e-4));
            }
        }
    }

    /** Groups of 2 ranked by their best score, the best 2 kept, the 3 best experts in them. */
    private static int[] chosen(double[] scores) {
        Integer[] groups = {0, 1, 2, 3};
        Arrays.sort(groups, (a, b) -> Double.compare(groupBest(scores, b), groupBest(scores, a)));
        List<Integer> candidates = new ArrayList<>();
        for (int g : new int[] {groups[0], groups[1]}) {
            candidates.add(2 * g);
            candidates.add(2 * g + 1);
        }
        candidates.sort((a, b) -> Double.compare(scores[b], scores[a]));
        return new int[] {candidates.get(0), candidates.get(1), candidates.get(2)};
    }

    private static double groupBest(double[] scores, int g) {
        return Math.max(scores[2 * g], scores[2 * g + 1]);
    }

    /** down · (silu(gate · x) ⊙ (up · x)) of one MLP stored at the given offsets, gate rows then up rows. */
    private static double[] gatedMlp(float[] x, float[] gateUp, int guOff, float[] down, int dOff, int width) {
        double[] h = new double[width];
        for (int c = 0; c < width; c++) {
            double g = dot(x, gateUp, guOff + c * H);
            double u = dot(x, gateUp, guOff + (width + c) * H);
            h[c] = g / (1 + Math.exp(-g)) * u;
        }
        double[] y = new double[H];
        for (int o = 0; o < H; o++) {
            for (int c = 0; c < width; c++) {
                y[o] += h[c] * down[dOff + o * width + c];
            }
        }
        return y;
    }

    private static double dot(float[] x, float[] w, int off) {
        double s = 0;
        for (int i = 0; i < x.length; i++) {
            s += (double) x[i] * w[off + i];
        }
        return s;
    }
}
