package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.mstar.engine.PrefillHandoff;
import org.mstar.schemas.KvHandoff;

class HandoffRecordsTest {
    /** Opaque states of three resources, of 384, 384 and 20 bytes. */
    private static PrefillHandoff handoff() {
        Random rnd = new Random(1);
        Map<String, ByteBuffer> states = new LinkedHashMap<>();
        List<String> keys = List.of("kv", "kv_windowed", "rope");
        int[] sizes = {384, 384, 20};
        for (int i = 0; i < keys.size(); i++) {
            byte[] data = new byte[sizes[i]];
            rnd.nextBytes(data);
            states.put(keys.get(i), ByteBuffer.wrap(data));
        }
        return new PrefillHandoff("r", new int[] {5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, new int[] {42}, states);
    }

    private static Map<Integer, KvHandoff> byPart(List<KvHandoff> records) {
        Map<Integer, KvHandoff> out = new HashMap<>();
        records.forEach(r -> out.put(r.getPart(), r));
        return out;
    }

    @Test
    void aPartInsideOneStateIsAViewOfItAndOneAcrossStatesACopy() {
        byte[] kv = new byte[384];
        byte[] windowed = new byte[384];
        Map<String, ByteBuffer> states = new LinkedHashMap<>();
        states.put("kv", ByteBuffer.wrap(kv));
        states.put("kv_windowed", ByteBuffer.wrap(windowed));
        PrefillHandoff h = new PrefillHandoff("r", new int[] {5, 6}, new int[] {42}, states);
        List<KvHandoff> records = HandoffRecords.split(h, TestRequests.request("r", 1), 100, 0);
        kv[150] = 7; // byte 50 of part 1, inside kv
        assertThat(records.get(1).getData().get(50)).isEqualTo((byte) 7);
        windowed[6] = 9; // byte 90 of part 3 (bytes 300-399: kv's end and kv_windowed's start)
        assertThat(records.get(3).getData().get(90)).isEqualTo((byte) 0);
    }

    @Test
    void aHandoffSplitIntoBoundedRecordsComesBackWhole() {
        PrefillHandoff h = handoff();
        List<KvHandoff> records = HandoffRecords.split(h, TestRequests.request("r", 1), 100, 1234);
        assertThat(records).hasSize((int) ((h.stateBytes() + 99) / 100));
        assertThat(records).allSatisfy(r -> assertThat(HandoffRecords.dataBytes(r)).isBetween(1, 100));
        assertThat(records.get(0).getHeader().getPublishedAtMs()).isEqualTo(1234);
        assertThat(records.subList(1, records.size())).allSatisfy(r -> assertThat(r.getHeader()).isNull());

        PrefillHandoff back = HandoffRecords.assemble(byPart(records));
        assertThat(back.requestId()).isEqualTo("r");
        assertThat(back.prompt()).containsExactly(h.prompt());
        assertThat(back.generated()).containsExactly(42);
        assertThat(back.states()).containsOnlyKeys(h.states().keySet());
        h.states().forEach((key, bytes) -> assertThat(back.states().get(key)).as(key).isEqualTo(bytes));
        assertThat(h.states().get("kv").remaining()).as("the sender's views are left as they were").isEqualTo(384);
    }

    @Test
    void oneRecordWhenTheLimitAllowsItAndItsStatesAreViewsOfThatRecord() {
        List<KvHandoff> records = HandoffRecords.split(handoff(), TestRequests.request("r", 1), 1 << 20, 0);
        assertThat(records).hasSize(1);
        ByteBuffer data = records.get(0).getData();
        PrefillHandoff back = HandoffRecords.assemble(byPart(records));
        data.put(data.position() + 384, (byte) (data.get(data.position() + 384) + 1));
        assertThat(back.states().get("kv_windowed").get(0)).as("a view sees the record's byte change")
                .isEqualTo(data.get(data.position() + 384));
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
                ByteBuffer.wrap(new byte[1])));
        assertThatThrownBy(() -> HandoffRecords.assemble(shortened)).hasMessageContaining("announces");
    }
}
