package org.mstar.device.cpu;

import java.util.Arrays;
import org.mstar.device.MoeRouting;

/**
 * {@link org.mstar.device.MoeOps#moeRoute} on the host, row by row in the order {@link MoeRouting} states: scores,
 * the group limit, the top k (ties to the lower index), the optional normalisation, the scaling.
 */
final class CpuMoeRouter {
    private CpuMoeRouter() {}

    static void run(ParallelLoop loop, CpuTensor logits, MoeRouting routing, CpuTensor ids, CpuTensor weights) {
        int rows = routing.routedRows(logits, ids, weights);
        int experts = (int) logits.dim(-1);
        int k = routing.topK();
        loop.forChunks(rows, (long) experts * 8, (from, to) -> {
            float[] scores = new float[experts];
            int[] chosen = new int[k];
            float[] w = new float[k];
            for (int row = from; row < to; row++) {
                FloatRows.read(logits, row * experts, scores, 0, experts);
                score(routing.scoring(), scores);
                boolean[] candidate = candidates(routing, scores);
                topK(scores, candidate, chosen, w);
                weigh(routing, w);
                for (int j = 0; j < k; j++) {
                    ids.setInt(row * k + j, chosen[j]);
                    weights.setFloat(row * k + j, w[j]);
                }
            }
        });
    }

    /** Softmax in fp32 (max subtracted first), or each logit's sigmoid, in place. */
    private static void score(MoeRouting.Scoring scoring, float[] s) {
        if (scoring == MoeRouting.Scoring.SIGMOID) {
            for (int e = 0; e < s.length; e++) {
                s[e] = (float) (1 / (1 + Math.exp(-s[e])));
            }
            return;
        }
        float max = Float.NEGATIVE_INFINITY;
        for (float v : s) {
            max = Math.max(max, v);
        }
        float sum = 0;
        for (int e = 0; e < s.length; e++) {
            s[e] = (float) Math.exp(s[e] - max);
            sum += s[e];
        }
        for (int e = 0; e < s.length; e++) {
            s[e] /= sum;
        }
    }

    /** The experts of the {@code topkGroups} groups whose best score is highest (ties to the lower group). */
    private static boolean[] candidates(MoeRouting routing, float[] scores) {
        int size = routing.groupSize(scores.length);
        float[] groupBest = new float[routing.numGroups()];
        for (int g = 0; g < groupBest.length; g++) {
            groupBest[g] = Float.NEGATIVE_INFINITY;
            for (int e = g * size; e < (g + 1) * size; e++) {
                groupBest[g] = Math.max(groupBest[g], scores[e]);
            }
        }
        boolean[] openGroups = new boolean[groupBest.length];
        Arrays.fill(openGroups, true);
        boolean[] candidate = new boolean[scores.length];
        for (int pick = 0; pick < routing.topkGroups(); pick++) {
            int best = argmax(groupBest, openGroups);
            openGroups[best] = false;
            for (int e = best * size; e < (best + 1) * size; e++) {
                candidate[e] = true;
            }
        }
        return candidate;
    }

    /** The k best candidates, best first, and their scores. */
    private static void topK(float[] scores, boolean[] candidate, int[] chosen, float[] w) {
        boolean[] open = candidate.clone();
        for (int j = 0; j < chosen.length; j++) {
            int best = argmax(scores, open);
            chosen[j] = best;
            w[j] = scores[best];
            open[best] = false;
        }
    }

    /** Index of the largest value among the {@code open} ones, the lowest index on ties. */
    private static int argmax(float[] v, boolean[] open) {
        int best = -1;
        for (int i = 0; i < v.length; i++) {
            if (open[i] && (best < 0 || v[i] > v[best])) {
                best = i;
            }
        }
        return best;
    }

    private static void weigh(MoeRouting routing, float[] w) {
        if (routing.normTopkProb()) {
            float sum = 0;
            for (float v : w) {
                sum += v;
            }
            for (int j = 0; j < w.length; j++) {
                w[j] /= sum;
            }
        }
        for (int j = 0; j < w.length; j++) {
            w[j] *= routing.routedScalingFactor();
        }
    }
}
