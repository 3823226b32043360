package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.NODE;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.range;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.KVLayout;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.StreamLabel;

/**
 * Latent (MLA) KV pages: the pool holds one row of {@code kv_lora_rank + qk_rope_head_dim} values per token and layer
 * (measured on the pool itself at DeepSeek-V2-Lite's geometry), and the hand-off codec, the prefix cache and host
 * offload move those rows as they move K and V. The random-operation invariants run on latent pages in
 * {@link KVManagerPropertiesTest}.
 */
class LatentKvPagesTest {

    @Test
    void aDeepSeekV2LitePoolHolds576ValuesPerTokenAndLayer() {
        int layers = 27;
        int pages = 5;
        int pageSize = 64;
        PagedKVConfig config = PagedKVConfig.builder(layers, 1, 192, 4096).numQoHeads(16).layout(KVLayout.MLA)
                .kvLoraRank(512).qkRopeHeadDim(64).maxNumPages(pages).pageSize(pageSize).build();
        try (CpuDevice cpu = new CpuDevice(1)) {
            KVManager kv = new KVManager(config, cpu, DType.BF16, 1, 0, null);
            long bytesPerTokenAndLayer = kv.pool().byteSize() / ((long) layers * pages * pageSize);
            assertThat(bytesPerTokenAndLayer).isEqualTo(576L * DType.BF16.bytes());
            kv.cleanup();
        }
    }

    @Test
    void aHandoffMovesLatentRowsBitForBit() {
        KvHarness prefill = new KvHarness(KvHarness.latentConfig(32, 4).build(), null);
        KvHarness decode = new KvHarness(KvHarness.latentConfig(32, 4).build(), null);
        prefill.kv.ingestRequest("a", null);
        prefill.extend("main", 1, Map.of("a", 10));
        decode.kv.ingestRequest("a", null);

        ByteBuffer wire = prefill.kv.codec().encode((PublishedKVInfo) prefill.kv.publish("a"));
        assertThat(decode.kv.admitRetrieve("a", NODE, DECODE, decode.kv.codec().decode(wire)))
                .isEqualTo(AdmitOutcome.OK);

        KvHarness.verify(decode.kv, "a", "main", prefill.oracle.get(new StreamLabel("a", "main")));
        assertThat(decode.kv.retrievedBytes()).isEqualTo(3L * decode.st().pool.pageBytes());
        decode.kv.assertPagesConserved();
        prefill.kv.cleanup();
        decode.kv.cleanup();
    }

    @Test
    void latentPagesDoNotDecodeIntoAnNhdCache() {
        KvHarness prefill = new KvHarness(KvHarness.latentConfig(32, 4).build(), null);
        KvHarness decode = new KvHarness(32, 4);
        prefill.kv.ingestRequest("a", null);
        prefill.extend("main", 1, Map.of("a", 6));

        ByteBuffer wire = prefill.kv.codec().encode((PublishedKVInfo) prefill.kv.publish("a"));
        assertThatThrownBy(() -> decode.kv.codec().decode(wire)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("do not match this cache");
        prefill.kv.cleanup();
        decode.kv.cleanup();
    }

    @Test
    void aSharedPrefixIsReadFromTheIndexAndOffloadRoundTrips() {
        KvHarness h = new KvHarness(KvHarness.latentConfig(16, 4).cpuOffloadPages(8).build(), null);
        assertThat(h.kv.enablePrefixCache(new byte[] {1}, Set.of(PREFILL, DECODE))).isTrue();
        int[] prompt = range(1, 10);
        assertThat(h.ingestAndPrefill("a", prompt)).isZero();
        assertThat(h.ingestAndPrefill("b", prompt)).isEqualTo(8);
        h.verify("b", "main");

        h.kv.offload("a");
        assertThat(h.kv.isOffloaded("a")).isTrue();
        h.kv.reload("a");
        h.verify("a", "main");
        h.kv.assertPagesConserved();
        h.kv.cleanup();
    }
}
