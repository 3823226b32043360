package org.mstar.device;

/**
 * The canonical inverse-CDF draw both devices implement bit for bit. Sums run in fp32 in a fixed
 * order so a parallel kernel can reproduce them: the vocabulary is cut into blocks of
 * {@link #BLOCK}; each block is summed sequentially, then the block sums sequentially.
 * With {@code target = u · total}, the chosen block is the first whose running sum exceeds
 * {@code target}, and inside it the first token with nonzero probability whose running sum (continuing
 * from the blocks before) exceeds it. When rounding leaves no such token, the last token with nonzero
 * probability (in that block, else overall) is chosen.
 */
public final class ProbabilitySampler {
    public static final int BLOCK = 256;

    private ProbabilitySampler() {}

    /** Draw from {@code probs[from .. from + vocab)} with uniform {@code u} ∈ [0, 1). */
    public static int sample(float[] probs, int from, int vocab, float u) {
        int blocks = (vocab + BLOCK - 1) / BLOCK;
        float[] blockSum = new float[blocks];
        for (int b = 0; b < blocks; b++) {
            float s = 0f;
            int end = Math.min(vocab, (b + 1) * BLOCK);
            for (int i = b * BLOCK; i < end; i++) {
                s += probs[from + i];
            }
            blockSum[b] = s;
        }
        float total = 0f;
        for (float s : blockSum) {
            total += s;
        }
        float target = u * total;
        float cum = 0f;
        int chosen = -1;
        int lastNonEmpty = -1;
        for (int b = 0; b < blocks; b++) {
            if (blockSum[b] > 0f) {
                lastNonEmpty = b;
            }
            if (cum + blockSum[b] > target && blockSum[b] > 0f) {
                chosen = b;
                break;
            }
            cum += blockSum[b];
        }
        if (chosen < 0) {
            if (lastNonEmpty < 0) {
                return 0;
            }
            chosen = lastNonEmpty;
            cum = 0f;
            for (int b = 0; b < chosen; b++) {
                cum += blockSum[b];
            }
        }
        int end = Math.min(vocab, (chosen + 1) * BLOCK);
        int lastPositive = -1;
        float c = cum;
        for (int i = chosen * BLOCK; i < end; i++) {
            float p = probs[from + i];
            c += p;
            if (p > 0f) {
                lastPositive = i;
                if (c > target) {
                    return i;
                }
            }
        }
        return lastPositive;
    }
}
