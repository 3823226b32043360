package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.KVSpec;
import org.mstar.resources.LoopGrowth;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PrefixSpan;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.StreamLayout;

/** Per-request KV config arithmetic: layout bounds, validation (400s) and loop room. */
class KVReqConfigTest {

    private static StreamLayout layout(int prompt, int perDecode, RetentionPolicy retention) {
        return new StreamLayout(List.of(new PrefixSpan(prompt, prompt, "prefill")),
                List.of(new LoopGrowth("decode", perDecode)), 0, retention, null);
    }

    private static KVReqConfig withLayouts(Map<String, StreamLayout> layouts, Map<String, Integer> caps) {
        return new KVReqConfig(null, null, null, null, null, null, null, null, true, layouts, caps);
    }

    private static KVSpec spec(int maxSeqLen, int pages) {
        return new KVSpec("kv", Set.of("llm"),
                PagedKVConfig.builder(2, 2, 4, maxSeqLen).pageSize(4).maxNumPages(pages).build());
    }

    @Test
    void positionsSlotsAndPagesTotalTheSpansAndTheGrowthAtTheCaps() {
        StreamLayout l = new StreamLayout(List.of(new PrefixSpan(10, 10, "prefill"), new PrefixSpan(4, 1, "prefill")),
                List.of(new LoopGrowth("decode", 1)), 2, null, null);
        Map<String, Integer> caps = Map.of("decode", 5);
        assertThat(l.positions(caps)).isEqualTo(16);
        assertThat(l.slots(caps)).isEqualTo(21);
        assertThat(l.pages(caps, 4)).isEqualTo(6);
        assertThat(l.positions(Map.of())).isEqualTo(11);
    }

    @Test
    void aRetentionWindowIsBoundedWhateverTheCaps() {
        StreamLayout l = new StreamLayout(List.of(new PrefixSpan(20, 20, "prefill")),
                List.of(new LoopGrowth("decode", 3)), 0, new RetentionPolicy(10, 6), null);
        // peak max(6 + 10, 8) = 16; largest write past the prefix 14; one page of overrun
        assertThat(l.pages(Map.of("decode", 1000), 4)).isEqualTo(9);
        assertThat(l.pages(Map.of(), 4)).isEqualTo(9);
    }

    @Test
    void validateRefusesALabelOverMaxSeqLenButExemptsRetention() {
        KVReqConfig over = withLayouts(Map.of("main", layout(10, 1, null)), Map.of("decode", 7));
        assertThatThrownBy(() -> over.validate(spec(16, 64)))
                .isInstanceOf(RequestValidationException.class)
                .hasMessageContaining("kv_layout")
                .hasMessageContaining("label 'main' would hold 17 positions")
                .hasMessageContaining("max_seq_len 16");
        withLayouts(Map.of("main", layout(10, 1, null)), Map.of("decode", 6)).validate(spec(16, 64));
        withLayouts(Map.of("main", layout(10, 1, new RetentionPolicy(8))), Map.of("decode", 700)).validate(spec(16, 64));
        over.validate(null);
        assertThatThrownBy(() -> withLayouts(null, Map.of("decode", -1)).validate(spec(16, 64)))
                .hasMessageContaining("loop_caps");
    }

    @Test
    void loopRoomIsTheMostIterationsBeforeTheRequestOutgrowsThePool() {
        KVReqConfig one = withLayouts(Map.of("main", layout(10, 2, null)), Map.of("decode", 5));
        // pages: ceil((10 + 2k) / 4) <= 10 usable  ->  k <= 15; positions allow 45
        assertThat(one.loopRoom(spec(100, 11))).containsExactly(Map.entry("decode", 15));
        // positions: 10 + 2k <= 30  ->  k <= 10
        assertThat(one.loopRoom(spec(30, 11))).containsExactly(Map.entry("decode", 10));

        KVReqConfig two = withLayouts(Map.of(
                "main", layout(10, 2, null),
                "aux", new StreamLayout(List.of(new PrefixSpan(8, 8, "prefill")), List.of(), 0, null, null),
                "window", new StreamLayout(List.of(), List.of(new LoopGrowth("roll", 4)), 0, new RetentionPolicy(8), null)),
                Map.of());
        // window holds ceil((8 + 4) / 4) + 1 = 4 pages, aux 2: main gets 4 -> 10 + 2k <= 16
        assertThat(two.loopRoom(spec(100, 11))).containsExactly(Map.entry("decode", 3));
        assertThat(withLayouts(Map.of("main", layout(50, 1, null)), Map.of()).loopRoom(spec(100, 11)))
                .containsExactly(Map.entry("decode", 0));
        assertThat(KVReqConfig.defaults().loopRoom(spec(100, 11))).isEmpty();
    }
}
