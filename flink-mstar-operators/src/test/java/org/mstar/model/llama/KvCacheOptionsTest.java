package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class KvCacheOptionsTest {
    @Test
    void unsetOptionsTakeTheDeploymentDefaults() {
        KvCacheOptions kv = KvCacheOptions.builder().maxSeqLen(512).maxNumPages(64).build();
        assertThat(kv).isEqualTo(new KvCacheOptions(512, 64, 16, 0, true, 0));
        assertThat(kv.toBuilder().maxNumPages(32).build()).isEqualTo(new KvCacheOptions(512, 32, 16, 0, true, 0));
        assertThat(kv.withWindowedLayerPages(8)).isEqualTo(new KvCacheOptions(512, 64, 16, 0, false, 8));
    }

    @Test
    void sizesLeftUnsetAreRefused() {
        assertThatThrownBy(() -> KvCacheOptions.builder().maxNumPages(64).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("invalid KV cache options 0/64/16/0");
        assertThatThrownBy(() -> KvCacheOptions.builder().maxSeqLen(512).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessage("invalid KV cache options 512/0/16/0");
    }
}
