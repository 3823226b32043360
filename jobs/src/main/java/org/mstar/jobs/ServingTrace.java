package org.mstar.jobs;

import java.util.Arrays;
import org.HdrHistogram.Histogram;

/**
 * When each request of a run arrived, got its first token and each later one, recorded as they happen (nanoTime).
 * Turned into {@link ServingResult} at the end. Single-threaded: one thread records.
 */
final class ServingTrace {
    private final long[] arrival;
    private final long[] first;
    private final long[] last;
    private final int[] tokens;
    private final int[] expected;
    /** Every gap between two tokens of one request, in microseconds. */
    private final Histogram itlMicros = new Histogram(3);
    private final long start;
    private long end;
    private int finished;
    /** Whether requests were answered whole ({@link #answered}) rather than token by token. */
    private boolean wholeAnswers;

    ServingTrace(ServingLoad load, long startNanos) {
        int n = load.requests().size();
        arrival = new long[n];
        first = new long[n];
        last = new long[n];
        tokens = new int[n];
        expected = load.requests().stream().mapToInt(ServingLoad.Request::outputLen).toArray();
        Arrays.fill(first, -1);
        start = startNanos;
    }

    void arrived(int i, long nanos) {
        arrival[i] = nanos;
    }

    /** A token of request {@code i}; its last one finishes it. */
    void token(int i, long nanos) {
        if (first[i] < 0) {
            first[i] = nanos;
        } else {
            itlMicros.recordValue(Math.max(0, (nanos - last[i]) / 1000));
        }
        last[i] = nanos;
        if (++tokens[i] == expected[i]) {
            finished++;
            end = Math.max(end, nanos);
        }
    }

    /**
     * Request {@code i}'s whole answer of {@code outputTokens} tokens, read at once (ML_PREDICT streams nothing): its
     * first token counts as read then, and it has no inter-token times.
     */
    void answered(int i, int outputTokens, long nanos) {
        wholeAnswers = true;
        first[i] = nanos;
        last[i] = nanos;
        tokens[i] = outputTokens;
        finished++;
        end = Math.max(end, nanos);
    }

    int finished() {
        return finished;
    }

    int requests() {
        return arrival.length;
    }

    long tokens() {
        return Arrays.stream(tokens).asLongStream().sum();
    }

    long start() {
        return start;
    }

    /** Per request: first token after arrival, ms; -1 for a request without one. */
    double[] ttftMillis() {
        double[] v = new double[arrival.length];
        for (int i = 0; i < v.length; i++) {
            v[i] = first[i] < 0 ? -1 : (first[i] - arrival[i]) / 1e6;
        }
        return v;
    }

    /** Per request: mean time per output token after the first, ms (NaN for one-token requests and whole answers). */
    double[] tpotMillis() {
        double[] v = new double[arrival.length];
        for (int i = 0; i < v.length; i++) {
            v[i] = tokens[i] > 1 && !wholeAnswers ? (last[i] - first[i]) / 1e6 / (tokens[i] - 1) : Double.NaN;
        }
        return v;
    }

    Histogram itlMicros() {
        return itlMicros;
    }

    /** From the start to the last token of the last request. */
    double seconds() {
        return (end - start) / 1e9;
    }
}
