package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.resources.KVCacheDType;
import org.mstar.resources.runner.KvPoolDType;

class EngineSizingTest {
    private static final long GIB = 1L << 30;
    /** Llama-3.1-8B's KV page: 32 layers x (K, V) x 8 heads x 128 dims x 16 tokens x 2 bytes. */
    private static final long PAGE_8B = 2L * 32 * 8 * 128 * 16 * 2;

    /** An H200 after the 8B weights: 140 GiB, 16 GiB used, a 3 GiB reserve. */
    private static final EngineSizing.Device H200 = new EngineSizing.Device(140 * GIB, 16 * GIB, 15 * GIB, 3 * GIB,
            PAGE_8B, 16, 1);

    @Test
    void theKvPoolTakesTheFractionLeftAfterWeightsAndReserve() {
        EngineSizing s = EngineSizing.size(EngineSizing.Request.sizedByDevice(), H200);

        long expected = ((long) (0.9 * 140 * GIB) - 16 * GIB - 3 * GIB) / PAGE_8B;
        assertThat(s.pages()).isEqualTo(expected).isEqualTo(54_784);
        assertThat(s.maxBatchRows()).isEqualTo(1024);
        assertThat(s.tokenBudget()).isEqualTo(16384);
        assertThat(s.reason()).contains("90 % of 140.0 GiB", "16.0 GiB in use (weights 15.0 GiB)",
                "activation reserve 3.0 GiB", "KV sized to 54784 pages = 876544 tokens");
    }

    @Test
    void fp8KvPagesHoldTwiceTheTokensInTheSameRoom() {
        ModelConfig llama8b = ModelConfig.builder(Architecture.LLAMA).hiddenSize(4096).intermediateSize(14336)
                .numLayers(32).numHeads(32).numKvHeads(8).headDim(128).maxPositionEmbeddings(8192).vocabSize(128256)
                .build();
        long bf16 = ModelCost.kvPageBytes(llama8b, 16, KvPoolDType.of(KVCacheDType.AUTO, DType.BF16));
        long fp8 = ModelCost.kvPageBytes(llama8b, 16, KvPoolDType.of(KVCacheDType.FP8_E4M3, DType.BF16));
        assertThat(bf16).isEqualTo(PAGE_8B);
        assertThat(fp8).isEqualTo(PAGE_8B / 2);
        EngineSizing wide = EngineSizing.size(EngineSizing.Request.sizedByDevice(), H200);
        EngineSizing narrow = EngineSizing.size(EngineSizing.Request.sizedByDevice(),
                new EngineSizing.Device(140 * GIB, 16 * GIB, 15 * GIB, 3 * GIB, fp8, 16, 1));
        assertThat(narrow.pages()).isEqualTo(2 * wide.pages()).isEqualTo(109_568);
        assertThat(wide.reason()).contains("876544 tokens (107.0 GiB, 131072 bytes a token)");
        assertThat(narrow.reason()).contains("1753088 tokens (107.0 GiB, 65536 bytes a token)");
    }

    @Test
    void aSmallerGpuDefaultsToTheLargestDecodeGraphsRowsAndHalfTheBudget() {
        EngineSizing.Device gpu24 = new EngineSizing.Device(24 * GIB, 3 * GIB, 2 * GIB, GIB, PAGE_8B, 16, 1);
        EngineSizing.Device gpu80 = new EngineSizing.Device(80 * GIB, 16 * GIB, 15 * GIB, 3 * GIB, PAGE_8B, 16, 1);

        EngineSizing small = EngineSizing.size(EngineSizing.Request.sizedByDevice(), gpu24);
        EngineSizing large = EngineSizing.size(EngineSizing.Request.sizedByDevice(), gpu80);

        assertThat(small.maxBatchRows()).isEqualTo(256).isEqualTo(small.largestDecodeGraph());
        assertThat(small.tokenBudget()).isEqualTo(8192);
        assertThat(large.maxBatchRows()).isEqualTo(1024);
        assertThat(large.largestDecodeGraph()).isEqualTo(1024);
        assertThat(large.tokenBudget()).isEqualTo(16384);
    }

    @Test
    void aLowerFractionLeavesTheRestOfTheDeviceFree() {
        EngineSizing half = EngineSizing.size(EngineSizing.Request.of(null, null, null, 0.5), H200);
        EngineSizing most = EngineSizing.size(EngineSizing.Request.of(null, null, null, 0.9), H200);

        assertThat(half.pages()).isLessThan(most.pages());
        long used = 16 * GIB + 3 * GIB + half.pages() * PAGE_8B;
        assertThat(used).isLessThanOrEqualTo(70 * GIB).isGreaterThan(70 * GIB - PAGE_8B);
    }

    @Test
    void twoEnginesOnOneDeviceSplitWhatIsLeft() {
        EngineSizing first = EngineSizing.size(EngineSizing.Request.sizedByDevice(), new EngineSizing.Device(140 * GIB,
                16 * GIB, 15 * GIB, 3 * GIB, PAGE_8B, 16, 0.5));
        long afterFirst = 16 * GIB + 3 * GIB + first.pages() * PAGE_8B;
        EngineSizing second = EngineSizing.size(EngineSizing.Request.sizedByDevice(), new EngineSizing.Device(
                140 * GIB, afterFirst, 15 * GIB, 3 * GIB, PAGE_8B, 16, 1));

        assertThat(first.pages()).isEqualTo(54_784 / 2);
        // the second's pool is the first's less the second's own reserve
        assertThat(second.pages()).isEqualTo(((long) (0.9 * 140 * GIB) - afterFirst - 3 * GIB) / PAGE_8B)
                .isEqualTo(first.pages() - (int) (3 * GIB / PAGE_8B));
        assertThat(first.reason()).contains("50 % of the room left");
    }

    @Test
    void explicitValuesWin() {
        EngineSizing s = EngineSizing.size(EngineSizing.Request.of(64, 2048, 1000, 0.9), H200);

        assertThat(s.maxBatchRows()).isEqualTo(64);
        assertThat(s.tokenBudget()).isEqualTo(2048);
        assertThat(s.pages()).isEqualTo(1000);
        assertThat(s.reason()).contains("KV set to 1000 pages", "rows or budget set");
    }

    @Test
    void theBudgetCoversEveryRowsDecode() {
        EngineSizing s = EngineSizing.size(EngineSizing.Request.of(20_000, null, null, 0.9), H200);

        assertThat(s.tokenBudget()).isEqualTo(20_000);
    }

    @Test
    void aDeviceWithoutRoomForKvIsRefusedWithTheNumbers() {
        EngineSizing.Device full = new EngineSizing.Device(80 * GIB, 70 * GIB, 15 * GIB, 3 * GIB, PAGE_8B, 16, 1);

        assertThatThrownBy(() -> EngineSizing.size(EngineSizing.Request.sizedByDevice(), full))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("no room for a KV cache")
                .hasMessageContaining("70.0 GiB in use")
                .hasMessageContaining("mstar.engine.gpu-memory-fraction");
        // set pages are taken as they are: the allocation itself will say whether they fit
        assertThat(EngineSizing.size(EngineSizing.Request.of(null, null, 100, 0.9), full).pages()).isEqualTo(100);
    }

    @Test
    void fractionsOutsideZeroToOneAreRefused() {
        assertThatThrownBy(() -> EngineSizing.Request.of(null, null, null, 0))
                .hasMessageContaining("must be in (0, 1]");
        assertThatThrownBy(() -> EngineSizing.Request.of(null, null, null, 1.5))
                .hasMessageContaining("must be in (0, 1]");
    }
}
