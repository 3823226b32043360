package org.mstar.model.whisper;

import java.util.Arrays;

/**
 * Whisper's rules for timestamp tokens when a transcription asks for them, as transformers'
 * {@code WhisperTimeStampLogitsProcessor} applies them to each draw: never {@code <|notimestamps|>}; timestamps come
 * in pairs (after a lone timestamp only another timestamp or the end, after a pair only text); they never go back in
 * time (nor repeat, except to close a pair); the first generated token is a timestamp no later than the initial
 * limit; and when the timestamps together are likelier than any single text token, the draw must take a timestamp.
 */
public final class TimestampRules {
    private final int noTimestamps;
    private final int timestampBegin;
    private final int eos;
    private final int maxInitialIndex;

    public TimestampRules(WhisperConfig config) {
        this.noTimestamps = config.noTimestampsTokenId();
        this.timestampBegin = config.timestampBegin();
        this.eos = config.eosTokenId();
        this.maxInitialIndex = config.maxInitialTimestampIndex();
    }

    /**
     * The token ids the next draw may not take.
     *
     * @param sampled the tokens generated so far in this window (after its prompt)
     * @param logits the draw's logits {@code [vocab]}, with the tokens already suppressed for it at -inf; not changed
     */
    public boolean[] disallowed(int[] sampled, float[] logits) {
        int vocab = logits.length;
        boolean[] out = new boolean[vocab];
        out[noTimestamps] = true;
        int n = sampled.length;
        boolean lastWasTimestamp = n >= 1 && sampled[n - 1] >= timestampBegin;
        boolean penultimateWasTimestamp = n < 2 || sampled[n - 2] >= timestampBegin;
        if (lastWasTimestamp) {
            if (penultimateWasTimestamp) {
                Arrays.fill(out, timestampBegin, vocab, true);
            } else {
                Arrays.fill(out, 0, eos, true);
            }
        }
        int lastTimestamp = -1;
        for (int t : sampled) {
            if (t >= timestampBegin) {
                lastTimestamp = t;
            }
        }
        if (lastTimestamp >= 0) {
            // a pair may close on the timestamp that opened it; otherwise the next one must be later
            int firstAllowed = lastWasTimestamp && !penultimateWasTimestamp ? lastTimestamp : lastTimestamp + 1;
            Arrays.fill(out, timestampBegin, Math.min(firstAllowed, vocab), true);
        }
        if (n == 0) {
            Arrays.fill(out, 0, timestampBegin, true);
            if (maxInitialIndex >= 0) {
                Arrays.fill(out, Math.min(vocab, timestampBegin + maxInitialIndex + 1), vocab, true);
            }
        }
        if (timestampsLikelier(logits, out)) {
            Arrays.fill(out, 0, timestampBegin, true);
        }
        return out;
    }

    /** Whether log Σ p(timestamps) exceeds the largest log p(text token), over the logits left allowed. */
    private boolean timestampsLikelier(float[] logits, boolean[] disallowed) {
        double max = Double.NEGATIVE_INFINITY;
        for (int i = 0; i < logits.length; i++) {
            if (!disallowed[i] && logits[i] > max) {
                max = logits[i];
            }
        }
        if (max == Double.NEGATIVE_INFINITY) {
            return false;
        }
        double timestampSum = 0;
        double maxText = Double.NEGATIVE_INFINITY;
        for (int i = 0; i < logits.length; i++) {
            if (disallowed[i] || logits[i] == Float.NEGATIVE_INFINITY) {
                continue;
            }
            if (i >= timestampBegin) {
                timestampSum += Math.exp(logits[i] - max);
            } else {
                maxText = Math.max(maxText, logits[i] - max);
            }
        }
        // both sides share the softmax's normaliser, so it cancels
        return timestampSum > 0 && Math.log(timestampSum) > maxText;
    }
}
