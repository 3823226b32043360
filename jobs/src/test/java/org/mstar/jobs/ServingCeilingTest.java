package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;

class ServingCeilingTest {
    private static final ModelConfig LLAMA_8B = llama8b();
    private static final double BW = 4e12;
    private static final double GEMM = 8e14;

    private static ModelConfig llama8b() {
        try {
            return ModelConfig.load(Path.of("../scripts/gpu/llama-3.1-8b.json"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static ServingCeiling ceiling(int rows, int budget, long kvTokens) {
        return new ServingCeiling(LLAMA_8B, rows, budget, kvTokens, 16, BW, GEMM);
    }

    @Test
    void oneRequestIsItsPrefillThenOneWeightBoundStepPerLaterToken() {
        int prompt = 100;
        int out = 10;
        double s = ceiling(256, 8192, 1 << 20).seconds(new ServingLoad("one", List.of(
                new ServingLoad.Request(prompt, out, 0))));

        double weights = ModelCost.weightBytes(LLAMA_8B) / BW;
        double kv = ModelCost.kvBytesPerToken(LLAMA_8B) / BW;
        double prefill = Math.max(weights, ModelCost.flops(LLAMA_8B, prompt, 1, 0) / GEMM) + prompt * kv;
        double decodes = 0;
        for (int i = 1; i < out; i++) {
            decodes += weights + (prompt + i) * kv; // the i-th decode reads the prompt, i-1 earlier tokens and its own
        }
        assertThat(s).isCloseTo(prefill + decodes, within(1e-12));
    }

    @Test
    void shortRequestsAreComputeBoundAndLongOnesReadBound() {
        ServingCeiling c = ceiling(256, 8192, 800_000);
        double shortRow = c.outputTokensPerSecond(ServingLoad.fixed(1000, 128, 128));
        double longRow = c.outputTokensPerSecond(ServingLoad.fixed(1000, 2048, 2048));

        // the worked figures for an H200 (about 21k and 7k output tok/s) are of this order
        assertThat(shortRow).isBetween(15_000.0, 40_000.0);
        assertThat(longRow).isBetween(4_000.0, 12_000.0);
    }

    @Test
    void fewerRowsOrLessKvNeverMakesTheCeilingHigher() {
        ServingLoad load = ServingLoad.chatMix(300, 3);
        double full = ceiling(256, 8192, 800_000).outputTokensPerSecond(load);

        assertThat(ceiling(16, 8192, 800_000).outputTokensPerSecond(load)).isLessThan(full);
        assertThat(ceiling(256, 8192, 20_000).outputTokensPerSecond(load)).isLessThan(full);
        assertThat(ceiling(256, 512, 800_000).outputTokensPerSecond(load)).isLessThanOrEqualTo(full);
    }

    @Test
    void aRequestLargerThanThePoolIsRefused() {
        assertThatThrownBy(() -> ceiling(4, 256, 1000).seconds(ServingLoad.fixed(1, 1000, 100)))
                .hasMessageContaining("does not fit a KV pool of 1000 tokens");
    }
}
