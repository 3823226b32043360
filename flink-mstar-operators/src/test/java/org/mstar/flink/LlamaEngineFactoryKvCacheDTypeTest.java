package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the Llama engine factory refuses of {@code mstar.kv.cache-dtype}, where the job is built. */
class LlamaEngineFactoryKvCacheDTypeTest {
    @Test
    void fp8KvWithBatchInvariantNumericsIsRefused(@TempDir Path dir) {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, dir.toString());
        conf.set(LlamaEngineOptions.KV_CACHE_DTYPE, "fp8_e4m3");
        conf.set(LlamaEngineOptions.BATCH_INVARIANT, true);
        assertThatThrownBy(() -> new LlamaEngineFactory(conf)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("'mstar.kv.cache-dtype' = fp8_e4m3 has no batch-invariant attention kernels: it cannot be"
                        + " set with 'mstar.engine.batch-invariant'");
    }

    @Test
    void anUnknownCacheDTypeIsRefusedByName(@TempDir Path dir) {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, dir.toString());
        conf.set(LlamaEngineOptions.KV_CACHE_DTYPE, "fp8_e5m2");
        assertThatThrownBy(() -> new LlamaEngineFactory(conf)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'fp8_e5m2'");
    }
}
