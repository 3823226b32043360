package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The bounds of a mixture of experts count the experts a step reads and computes, not a dense MLP: the tiny Qwen3-MoE
 * fixture (hidden 64, 4 layers of which layer 2 is dense with width 96, 8 experts of width 40, top 2; attention
 * 4 + 2 + 2 heads of 32 and the output projection: 24,576 parameters a layer; an LM head of 384 x 64).
 */
class ModelCostTest {
    private static final double ATTENTION = 24_576;
    private static final double HEAD = 384 * 64;
    private static final double DENSE_MLP = 3 * 64 * 96;
    private static final double ROUTER = 64 * 8;
    private static final double EXPERT = 3 * 64 * 40;

    private static ModelConfig qwen3Moe() throws Exception {
        return ModelConfig.load(Path.of("src/test/resources/org/mstar/model/fixtures/qwen3_moe"));
    }

    @Test
    void everyExpertIsInTheWeightsAndOneRowReadsOnlyItsTopK() throws Exception {
        ModelConfig c = qwen3Moe();
        double shared = HEAD + 4 * ATTENTION + DENSE_MLP + 3 * ROUTER;

        assertThat(ModelCost.weightBytes(c)).isEqualTo(2 * (shared + 3 * 8 * EXPERT));
        assertThat(ModelCost.weightBytesRead(c, 1)).isCloseTo(2 * (shared + 3 * 2 * EXPERT), within(1e-6));
        // more rows reach more distinct experts, never more than all of them
        assertThat(ModelCost.weightBytesRead(c, 4)).isCloseTo(2 * (shared + 3 * 8 * (1 - Math.pow(0.75, 4)) * EXPERT),
                within(1e-6));
        assertThat(ModelCost.weightBytesRead(c, 1e6)).isCloseTo(ModelCost.weightBytes(c), within(1e-6));
    }

    @Test
    void aTokenComputesItsTopKExperts() throws Exception {
        ModelConfig c = qwen3Moe();
        double perToken = 4 * ATTENTION + DENSE_MLP + 3 * (ROUTER + 2 * EXPERT);
        assertThat(ModelCost.flops(c, 10, 1, 0)).isEqualTo(2 * perToken * 10 + 2 * HEAD);
    }

    @Test
    void aDenseModelReadsEveryWeightWhateverItsRows() throws Exception {
        ModelConfig c = ModelConfig.load(Path.of("src/test/resources/org/mstar/model/fixtures/qwen3"));
        assertThat(ModelCost.weightBytesRead(c, 1)).isEqualTo(ModelCost.weightBytes(c));
        assertThat(ModelCost.weightBytesRead(c, 512)).isEqualTo(ModelCost.weightBytes(c));
    }
}
