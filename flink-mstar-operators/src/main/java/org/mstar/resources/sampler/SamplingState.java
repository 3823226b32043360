package org.mstar.resources.sampler;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.mstar.resources.SamplingReqConfig;

/**
 * One request's sampling state: its parameters, what its penalty has seen, and how many tokens it has
 * generated. That count is also the Philox offset of its next draw, so a request's random stream depends
 * only on (seed, position), never on the batch it shares.
 */
final class SamplingState {
    private final SamplingReqConfig config;
    private final long seed;
    /**
     * Presence form (window 0): prompt tokens (when penalised) and every generated token; kept only when the
     * request penalises, the one reader ({@link #addPenaltyCounts}) being skipped otherwise.
     */
    private final Set<Integer> seen = new HashSet<>();
    /** Window form: the last {@code repetitionWindow} generated tokens, a ring. */
    private final int[] recent;
    private int recentCount;
    private int recentNext;
    private long generated;
    private int[] extraStopIds = new int[0];

    SamplingState(SamplingReqConfig config, long seed) {
        this.config = config;
        this.seed = seed;
        this.recent = new int[config.repetitionWindow()];
    }

    SamplingReqConfig config() {
        return config;
    }

    long seed() {
        return seed;
    }

    /** Tokens accepted so far: the Philox offset of the next draw and the count min_tokens compares to. */
    long generated() {
        return generated;
    }

    boolean penalises() {
        return config.repetitionPenalty() != 1.0;
    }

    private boolean tracksPresence() {
        return recent.length == 0 && penalises();
    }

    /** Prompt tokens enter the presence set only when the request penalises its prompt. */
    void addPrompt(int[] tokens) {
        if (config.penalizePrompt() && tracksPresence()) {
            for (int t : tokens) {
                seen.add(t);
            }
        }
    }

    /** A kept token: seen by the penalty, counted, and the RNG offset moves past it. */
    void accept(int token) {
        if (tracksPresence()) {
            seen.add(token); // a boxed set insert per token: the largest per-row cost of a decode step's commit
        }
        if (recent.length > 0) {
            recent[recentNext] = token;
            recentNext = (recentNext + 1) % recent.length;
            recentCount = Math.min(recentCount + 1, recent.length);
        }
        generated++;
    }

    /** Back to a request that has generated nothing; parameters and stop ids stay. */
    void reset() {
        seen.clear();
        recentCount = 0;
        recentNext = 0;
        generated = 0;
    }

    void setExtraStopIds(int[] ids) {
        extraStopIds = ids.clone();
    }

    /**
     * Adds row {@code base}'s penalty exponents to {@code counts}: presence (1 per seen token) with no
     * window, else each token's count among the last {@code window} generated tokens.
     */
    void addPenaltyCounts(float[] counts, int base, int vocab) {
        if (recent.length == 0) {
            for (int t : seen) {
                if (t >= 0 && t < vocab) {
                    counts[base + t] = 1f;
                }
            }
            return;
        }
        for (int i = 0; i < recentCount; i++) {
            int t = recent[i];
            if (t >= 0 && t < vocab) {
                counts[base + t] += 1f;
            }
        }
    }

    /** The ids held back while fewer than min_tokens are generated (sorted), or null when none are. */
    int[] maskedStopIds(List<Integer> specStopIds) {
        if (generated >= config.minTokens()) {
            return null;
        }
        Set<Integer> ids = new TreeSet<>(specStopIds);
        Arrays.stream(extraStopIds).forEach(ids::add);
        return ids.isEmpty() ? null : ids.stream().mapToInt(Integer::intValue).toArray();
    }
}
