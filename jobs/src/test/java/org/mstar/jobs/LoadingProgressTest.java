package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

class LoadingProgressTest {
    @Test
    void aLargeModelShowsEachTenthOnceAndASmallOneNothing() {
        StringWriter text = new StringWriter();
        LoadingProgress progress = new LoadingProgress(new PrintWriter(text));
        long total = 10L << 30;
        for (long loaded = 0; loaded <= total; loaded += 256L << 20) {
            progress.loaded(loaded, total);
        }
        assertThat(text.toString().lines()).hasSize(10).startsWith("loading weights: 10% (1.0 of 10.0 GiB)")
                .endsWith("loading weights: 100% (10.0 of 10.0 GiB)");
        StringWriter none = new StringWriter();
        new LoadingProgress(new PrintWriter(none)).loaded(1 << 20, 2 << 20);
        assertThat(none.toString()).isEmpty();
    }
}
