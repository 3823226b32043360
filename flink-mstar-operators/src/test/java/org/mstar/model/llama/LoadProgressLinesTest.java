package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class LoadProgressLinesTest {
    @Test
    void aLargeModelShowsEachTenthOnceAndASmallOneNothing() {
        List<String> lines = new ArrayList<>();
        LoadProgressLines progress = new LoadProgressLines(lines::add);
        long total = 10L << 30;
        for (long loaded = 0; loaded <= total; loaded += 256L << 20) {
            progress.loaded(loaded, total);
        }
        assertThat(lines).hasSize(10).startsWith("loading weights: 10% (1.0 of 10.0 GiB)")
                .endsWith("loading weights: 100% (10.0 of 10.0 GiB)");
        List<String> none = new ArrayList<>();
        new LoadProgressLines(none::add).loaded(1 << 20, 2 << 20);
        assertThat(none).isEmpty();
    }
}
