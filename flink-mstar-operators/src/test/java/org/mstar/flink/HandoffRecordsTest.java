package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.engine.PrefillHandoff;
import org.mstar.resources.kv.KvPagePayload;
import org.mstar.schemas.KvHandoff;

class HandoffRecordsTest {
    private static PrefillHandoff handoff() {
        Random rnd = new Random(1);
        Map<String, PrefillHandoff.KvStream> kv = new HashMap<>();
        for (String label : List.of("main", "side")) {
            // 2 layers, 3 pages of [2, 4 tokens, 1 head, 2 dims] in F32: 384 bytes
            byte[] data = new byte[2 * 3 * 2 * 4 * 2 * 4];
            rnd.nextBytes(data);
            kv.put(label, new PrefillHandoff.KvStream(10, 3, new KvPagePayload(2, 3, 4, 1, 2, DType.F32, 0, 10, data)));
        }
        return new PrefillHandoff("r", new int[] {5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, new int[] {42}, kv,
                Map.of("main", 10));
    }

    private static Map<Integer, KvHandoff> byPart(List<KvHandoff> records) {
        Map<Integer, KvHandoff> out = new HashMap<>();
        records.forEach(r -> out.put(r.getPart(), r));
        return out;
    }

    @Test
    void aHandoffSplitIntoBoundedRecordsComesBackWhole() {
        PrefillHandoff h = handoff();
        List<KvHandoff> records = HandoffRecords.split(h, TestRequests.request("r", 1), 100, 1234);
        long total = h.kv().values().stream().mapToLong(s -> s.pages().toBytes().length).sum();
        assertThat(records).hasSize((int) ((total + 99) / 100));
        assertThat(records).allSatisfy(r -> assertThat(HandoffRecords.dataBytes(r)).isBetween(1, 100));
        assertThat(records.get(0).getHeader().getPublishedAtMs()).isEqualTo(1234);
        assertThat(records.subList(1, records.size())).allSatisfy(r -> assertThat(r.getHeader()).isNull());

        PrefillHandoff back = HandoffRecords.assemble(byPart(records));
        assertThat(back.requestId()).isEqualTo("r");
        assertThat(back.prompt()).containsExactly(h.prompt());
        assertThat(back.generated()).containsExactly(42);
        assertThat(back.positions()).isEqualTo(h.positions());
        assertThat(back.kv()).containsOnlyKeys("main", "side");
        h.kv().forEach((label, s) -> {
            PrefillHandoff.KvStream b = back.kv().get(label);
            assertThat(b.seqLen()).isEqualTo(s.seqLen());
            assertThat(b.resetGeneration()).isEqualTo(s.resetGeneration());
            assertThat(b.pages().data()).isEqualTo(s.pages().data());
        });
    }

    @Test
    void oneRecordWhenTheLimitAllowsIt() {
        assertThat(HandoffRecords.split(handoff(), TestRequests.request("r", 1), 1 << 20, 0)).hasSize(1);
    }

    @Test
    void aMissingOrForeignPartIsRefused() {
        List<KvHandoff> records = HandoffRecords.split(handoff(), TestRequests.request("r", 1), 100, 0);
        Map<Integer, KvHandoff> parts = byPart(records);
        parts.remove(3);
        assertThatThrownBy(() -> HandoffRecords.assemble(parts)).hasMessageContaining("lacks part 3");
        Map<Integer, KvHandoff> headless = byPart(records);
        headless.remove(0);
        assertThatThrownBy(() -> HandoffRecords.assemble(headless)).hasMessageContaining("header");
        Map<Integer, KvHandoff> shortened = byPart(records);
        KvHandoff last = records.get(records.size() - 1);
        shortened.put(last.getPart(), new KvHandoff("r", last.getPart(), last.getParts(), null,
                java.nio.ByteBuffer.wrap(new byte[1])));
        assertThatThrownBy(() -> HandoffRecords.assemble(shortened)).hasMessageContaining("announces");
    }
}
