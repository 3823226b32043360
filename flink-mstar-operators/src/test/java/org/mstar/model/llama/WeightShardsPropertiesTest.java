package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.mstar.device.DType;
import org.mstar.device.DeviceGroup;
import org.mstar.device.KernelOptions;
import org.mstar.device.MoeRouting;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;

/**
 * Splitting a weight into its ranks' shards and gathering them back gives the weight, bit for bit, for every degree
 * and geometry: column-parallel block slices (fused q/k/v, gate/up), row-parallel column slices (o, down) and
 * contiguous row ranges (the LM head's vocabulary, the experts); and {@link ShardedWeights} holds exactly those
 * slices on each rank's device.
 */
class WeightShardsPropertiesTest {

    @Property(tries = 60)
    void blockSlicesGatherBack(@ForAll @IntRange(min = 1, max = 4) int degree,
                               @ForAll @IntRange(min = 1, max = 3) int blocks,
                               @ForAll @IntRange(min = 1, max = 5) int rowsEach,
                               @ForAll @IntRange(min = 1, max = 7) int cols, @ForAll long seed) {
        long[] blockRows = new long[blocks];
        long rows = 0;
        for (int b = 0; b < blocks; b++) {
            blockRows[b] = (long) degree * (rowsEach + b);
            rows += blockRows[b];
        }
        float[] w = random(rows * cols, seed);
        List<float[]> shards = new ArrayList<>();
        for (int r = 0; r < degree; r++) {
            shards.add(WeightShards.rowBlocks(w, cols, blockRows, r, degree));
        }
        assertThat(WeightShards.gatherRowBlocks(shards, cols, blockRows)).isEqualTo(w);
    }

    @Property(tries = 60)
    void columnSlicesGatherBack(@ForAll @IntRange(min = 1, max = 4) int degree,
                                @ForAll @IntRange(min = 1, max = 6) int rows,
                                @ForAll @IntRange(min = 1, max = 5) int colsEach, @ForAll long seed) {
        long cols = (long) degree * colsEach;
        float[] w = random(rows * cols, seed);
        List<float[]> shards = new ArrayList<>();
        for (int r = 0; r < degree; r++) {
            shards.add(WeightShards.columns(w, rows, cols, (long) r * colsEach, colsEach));
        }
        assertThat(WeightShards.gatherColumns(shards, rows)).isEqualTo(w);
    }

    @Property(tries = 60)
    void vocabularyRangesCoverEveryRowOnce(@ForAll @IntRange(min = 1, max = 8) int degree,
                                           @ForAll @IntRange(min = 8, max = 300) int vocab,
                                           @ForAll @IntRange(min = 1, max = 4) int cols, @ForAll long seed) {
        ShardLayout layout = new ShardLayout(degree, 1, 1, 1, 1, 0, 0, vocab);
        float[] w = random((long) vocab * cols, seed);
        List<float[]> shards = new ArrayList<>();
        for (int r = 0; r < degree; r++) {
            assertThat(layout.vocabCount(r)).isBetween(vocab / degree, vocab / degree + 1);
            shards.add(WeightShards.rows(w, cols, layout.vocabFirst(r), layout.vocabCount(r)));
        }
        assertThat(WeightShards.gatherRows(shards)).isEqualTo(w);
    }

    /** Qwen3-MoE with a dense middle layer: q/k/v, o, gate/up, down, experts and LM head all split. */
    @Property(tries = 6)
    void shardedWeightsHoldEachRanksSlices(@ForAll("degrees") int degree, @ForAll long seed) {
        ModelConfig c = ModelConfig.builder(Architecture.QWEN3_MOE).hiddenSize(16).intermediateSize(24).numLayers(2)
                .numHeads(4).numKvHeads(2).headDim(8).maxPositionEmbeddings(64).vocabSize(37)
                .moe(new MoeConfig(4, 12, MoeRouting.softmaxTopK(2, true), List.of(true, false))).build();
        try (CpuDevice cpu = new CpuDevice(1);
             LlamaWeights full = RandomWeights.create(c, cpu, DType.F32, seed);
             DeviceGroup group = DeviceGroup.open("cpu", degree, KernelOptions.defaults());
             ShardedWeights shards = ShardedWeights.split(full, ShardLayout.of(c, degree), group)) {
            long h = c.hiddenSize();
            LlamaLayerWeights sparse = full.layer(0);
            LlamaLayerWeights dense = full.layer(1);
            assertThat(WeightShards.gatherRowBlocks(each(shards, r -> r.layer(0).qkvWeight()), h,
                    new long[] {c.qSize(), c.kvSize(), c.kvSize()})).isEqualTo(host(sparse.qkvWeight()));
            assertThat(WeightShards.gatherColumns(each(shards, r -> r.layer(0).oWeight()), h))
                    .isEqualTo(host(sparse.oWeight()));
            assertThat(WeightShards.gatherRowBlocks(each(shards, r -> r.layer(1).gateUpWeight()), h,
                    new long[] {c.intermediateSize(), c.intermediateSize()})).isEqualTo(host(dense.gateUpWeight()));
            assertThat(WeightShards.gatherColumns(each(shards, r -> r.layer(1).downWeight()), h))
                    .isEqualTo(host(dense.downWeight()));
            assertThat(WeightShards.gatherRows(each(shards, r -> r.layer(0).moe().gateUp())))
                    .isEqualTo(host(sparse.moe().gateUp()));
            assertThat(WeightShards.gatherRows(each(shards, r -> r.layer(0).moe().down())))
                    .isEqualTo(host(sparse.moe().down()));
            assertThat(WeightShards.gatherRows(each(shards, LlamaWeights::lmHead))).isEqualTo(host(full.lmHead()));
            for (int r = 0; r < degree; r++) {
                assertThat(host(shards.rank(r).embedding())).isEqualTo(host(full.embedding()));
                assertThat(host(shards.rank(r).layer(0).moe().router())).isEqualTo(host(sparse.moe().router()));
                assertThat(shards.rank(r).layer(0).qkvWeight().device()).isSameAs(group.device(r));
            }
        }
    }

    @Provide
    Arbitrary<Integer> degrees() {
        return Arbitraries.of(1, 2);
    }

    @Example
    void refusesWhatItCannotSplit() {
        ModelConfig olmoe = ModelConfig.builder(Architecture.OLMOE).hiddenSize(32).intermediateSize(20).numLayers(2)
                .numHeads(4).numKvHeads(2).maxPositionEmbeddings(64).vocabSize(512)
                .moe(new MoeConfig(4, 20, MoeRouting.softmaxTopK(2, false), List.of(true, true))).build();
        assertThatThrownBy(() -> ShardLayout.of(olmoe, 2)).hasMessage(
                "tensor parallel 2: OlmoeForCausalLM's q/k norms span every head, so its heads cannot be split");
        ModelConfig sixExperts = ModelConfig.builder(Architecture.QWEN3_MOE).hiddenSize(16).intermediateSize(24)
                .numLayers(1).numHeads(4).numKvHeads(4).headDim(8).maxPositionEmbeddings(64).vocabSize(37)
                .moe(new MoeConfig(6, 12, MoeRouting.softmaxTopK(2, true), List.of(true))).build();
        assertThatThrownBy(() -> ShardLayout.of(sixExperts, 4)).hasMessage(
                "tensor parallel 4 does not divide the 6 routed experts of Qwen3MoeForCausalLM");
    }

    private static List<float[]> each(ShardedWeights shards, Function<LlamaWeights, Tensor> pick) {
        List<float[]> out = new ArrayList<>();
        for (int r = 0; r < shards.degree(); r++) {
            out.add(host(pick.apply(shards.rank(r))));
        }
        return out;
    }

    private static float[] host(Tensor t) {
        return t.device().toFloats(t);
    }

    private static float[] random(long n, long seed) {
        Random rnd = new Random(seed);
        float[] w = new float[Math.toIntExact(n)];
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) rnd.nextGaussian();
        }
        return w;
    }
}
