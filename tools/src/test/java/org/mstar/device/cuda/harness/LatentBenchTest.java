package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LatentKvConfig;
import org.mstar.resources.kv.KVManager;

/** The latent pool the --latent-perf rows measure, built as they build it (on the CPU): 576 values a token and layer. */
class LatentBenchTest {
    @Test
    void deepseekV2LitesLatentPoolHolds576ValuesATokenAndLayer() {
        ModelConfig config = LatentBench.deepseekV2Lite();
        int pages = 4;
        KvCacheOptions options = KvCacheOptions.builder().maxSeqLen(pages * LatentBench.PAGE).maxNumPages(pages)
                .pageSize(LatentBench.PAGE).prefixCache(false).build();
        try (CpuDevice cpu = new CpuDevice()) {
            KVManager kv = new KVManager(LatentKvConfig.of(config, options, config.numLayers(), pages, false, 0), cpu,
                    DType.BF16, 1, 0, null);
            Tensor pool = kv.pool();
            assertThat(pool.shape()).containsExactly(27L, pages, 1L, LatentBench.PAGE, 1L, LatentBench.WIDTH);
            assertThat(pool.byteSize() / (27L * pages * LatentBench.PAGE)).isEqualTo(2L * 576);
            kv.cleanup();
        }
    }
}
