package org.mstar.jobs;

import java.io.PrintWriter;
import java.util.Locale;

/** A line on stderr every few seconds of a long run: requests done, tokens, tokens/s so far. */
final class ServingProgress {
    private static final long EVERY_NANOS = 5_000_000_000L;

    private final PrintWriter err;
    private final String what;
    private long lastPrint;

    ServingProgress(PrintWriter err, String what) {
        this.err = err;
        this.what = what;
        this.lastPrint = System.nanoTime();
    }

    /** Prints when the last line is old enough. */
    void update(ServingTrace trace) {
        long now = System.nanoTime();
        if (now - lastPrint < EVERY_NANOS) {
            return;
        }
        lastPrint = now;
        double s = (now - trace.start()) / 1e9;
        err.printf(Locale.ROOT, "  %s: %d of %d requests done, %d tokens, %.0f tok/s, %.0f s%n", what,
                trace.finished(), trace.requests(), trace.tokens(), trace.tokens() / s, s);
        err.flush();
    }
}
