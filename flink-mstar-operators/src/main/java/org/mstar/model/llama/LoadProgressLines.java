package org.mstar.model.llama;

import java.util.Locale;
import java.util.function.Consumer;

/**
 * Loading a model's weights as a few lines of text: for models of at least {@link #MIN_BYTES}, a line each time
 * another tenth of the bytes is in place ("loading weights: 30% (4.2 of 14.0 GiB)"); small models say nothing.
 */
public final class LoadProgressLines implements LoadProgress {
    static final long MIN_BYTES = 256L << 20;
    private final Consumer<String> out;
    private int tenthsShown;

    /** @param out takes each line (the console, a log) */
    public LoadProgressLines(Consumer<String> out) {
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
            out.accept(String.format(Locale.ROOT, "loading weights: %d%% (%.1f of %.1f GiB)", tenths * 10,
                    loadedBytes / (double) (1L << 30), totalBytes / (double) (1L << 30)));
        }
    }
}
