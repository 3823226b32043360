package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.mstar.resources.KVCacheDType;

class KvCacheOptionsTest {
    @Test
    void unsetOptionsTakeTheDeploymentDefaults() {
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(64).build();
        assertThat(kv).isEqualTo(new KvCacheOptions(512, 64, 16, 0, true, 0, KVCacheDType.AUTO));
        assertThat(kv.toBuilder().maxNumPages(32).build())
                .isEqualTo(new KvCacheOptions(512, 32, 16, 0, true, 0, KVCacheDType.AUTO));
        assertThat(kv.withWindowedLayerPages(8)).isEqualTo(new KvCacheOptions(512, 64, 16, 0, false, 8, KVCacheDType.AUTO));
        KvCacheOptions fp8 = kv.toBuilder().cacheDType(KVCacheDType.FP8_E4M3).build();
        assertThat(fp8.toBuilder().maxNumPages(32).build().cacheDType()).isEqualTo(KVCacheDType.FP8_E4M3);
    }

    @Test
    void sizesLeftUnsetAreRefused() {
        assertThatThrownBy(() -> KvCacheOptions.builder().maxNumPages(64).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("invalid KV cache options 0/64/16/0");
        assertThatThrownBy(() -> KvCacheOptions.builder().maxSeqLen(512).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("invalid KV cache options 512/0/16/0");
    }

    @Test
    void cacheDTypesParseByTheirOptionNamesOnly() {
        assertThat(KVCacheDType.parse("fp8_e4m3")).isEqualTo(KVCacheDType.FP8_E4M3);
        assertThat(KVCacheDType.parse(" AUTO ")).isEqualTo(KVCacheDType.AUTO);
        assertThatThrownBy(() -> KVCacheDType.parse("fp8_e5m2")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'fp8_e4m3'").hasMessageContaining("'fp8_e5m2'");
    }
}
