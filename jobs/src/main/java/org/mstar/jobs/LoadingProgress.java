package org.mstar.jobs;

import java.io.PrintWriter;
import java.util.Locale;
import org.mstar.model.llama.LoadProgress;

/**
 * Loading a model's weights, as the command line shows it: for models of at least {@link #MIN_BYTES}, a line each
 * time another tenth of the bytes is in place ("loading weights: 30% (4.2 of 14.0 GiB)"); small models say nothing.
 */
final class LoadingProgress implements LoadProgress {
    static final long MIN_BYTES = 256L << 20;
    private final PrintWriter out;
    private int tenthsShown;

    LoadingProgress(PrintWriter out) {
        this.out = out;
    }

    @Override
    public void loaded(long loadedBytes, long totalBytes) {
        if (totalBytes < MIN_BYTES) {
            return;
        }
        int tenths = (int) (loadedBytes * 10 / totalBytes);
        if (tenths > tenthsShown) {
            tenthsShown = tenths;
            out.printf(Locale.ROOT, "loading weights: %d%% (%.1f of %.1f GiB)%n", tenths * 10,
                    loadedBytes / (double) (1L << 30), totalBytes / (double) (1L << 30));
            out.flush();
        }
    }
}
