package org.mstar.resources;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.resources.runner.KvPoolDType;

/**
 * The paged KV config's cache dtype: FP8 E4M3 pages or the model's dtype, set by builder or deployment override; latent
 * (MLA) pages refuse FP8 by name, however it is asked.
 */
class KVCacheDTypeTest {
    @Test
    void thePoolTakesFp8CodesOrTheModelsDtype() {
        assertThat(KvPoolDType.of(KVCacheDType.AUTO, DType.BF16)).isEqualTo(DType.BF16);
        assertThat(KvPoolDType.of(KVCacheDType.AUTO, DType.F32)).isEqualTo(DType.F32);
        assertThat(KvPoolDType.of(KVCacheDType.FP8_E4M3, DType.BF16)).isEqualTo(DType.F8_E4M3);
        assertThat(DType.F8_E4M3.bytes()).isEqualTo(1);
        assertThat(DType.F8_E4M3.isFloat()).as("not a dtype general ops take").isFalse();
    }

    @Test
    void aDeploymentOverrideSetsIt() {
        PagedKVConfig c = PagedKVConfig.builder(2, 2, 64, 1024).build();
        assertThat(c.cacheDType()).isEqualTo(KVCacheDType.AUTO);
        c.applyYamlOverrides(Map.of("cache_dtype", "fp8_e4m3"));
        assertThat(c.cacheDType()).isEqualTo(KVCacheDType.FP8_E4M3);
        assertThatThrownBy(() -> c.applyYamlOverrides(Map.of("cache_dtype", "int8")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'int8'");
    }

    @Test
    void latentPagesRefuseFp8() {
        PagedKVConfig.Builder latent = PagedKVConfig.builder(2, 1, 64, 1024).numQoHeads(4).layout(KVLayout.MLA)
                .kvLoraRank(32).qkRopeHeadDim(16);
        assertThatThrownBy(() -> latent.cacheDType(KVCacheDType.FP8_E4M3).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("KV cache dtype fp8_e4m3 does not cover latent (MLA) pages: use 'auto'");
        PagedKVConfig c = latent.cacheDType(KVCacheDType.AUTO).build();
        assertThatThrownBy(() -> c.applyYamlOverrides(Map.of("cache_dtype", "fp8_e4m3")))
                .hasMessageContaining("latent (MLA)");
    }
}
