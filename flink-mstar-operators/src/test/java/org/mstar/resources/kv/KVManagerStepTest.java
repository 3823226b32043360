package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.ctx;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.KVStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/** Admit, plan and commit of plain steps: layout, addressing, refusal, rollback, sink rows. */
class KVManagerStepTest {

    private static KVStep step(Segment... segs) {
        return KVStep.builder().segments(List.of(segs)).build();
    }

    private static Map<String, Integer> spans(Object... kv) {
        Map<String, Integer> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], (Integer) kv[i + 1]);
        }
        return m;
    }

    @Test
    void prefillThenDecodeLaysOutPageTablesAndWriteAddresses() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.kv.ingestRequest("b", null);
        KVPlanOutputs prefill = h.extend("main", 100, spans("a", 6, "b", 3));

        KVPlanOutput p = prefill.get("main");
        List<Integer> pa = h.stream("a", "main").pages;
        List<Integer> pb = h.stream("b", "main").pages;
        assertThat(p.indptrs().qoIndptr()).containsExactly(0, 6, 9);
        assertThat(p.indptrs().kvIndptr()).containsExactly(0, 2, 3);
        assertThat(p.indptrs().kvIndices()).containsExactly(pa.get(0), pa.get(1), pb.get(0));
        assertThat(p.indptrs().lastPageLen()).containsExactly(2, 3);
        assertThat(p.indptrs().kvLens()).containsExactly(6, 3);
        assertThat(p.writePages()).containsExactly(pa.get(0), pa.get(0), pa.get(0), pa.get(0), pa.get(1), pa.get(1),
                pb.get(0), pb.get(0), pb.get(0));
        assertThat(p.writeOffsets()).containsExactly(0, 1, 2, 3, 0, 1, 0, 1, 2);
        assertThat(p.isDecode()).isFalse();
        assertThat(h.stream("a", "main").storedLen).isEqualTo(6);
        assertThat(h.stream("b", "main").storedLen).isEqualTo(3);

        KVPlanOutput d = h.extend("main", 200, spans("a", 1, "b", 1)).get("main");
        assertThat(d.isDecode()).isTrue();
        assertThat(d.writePages()).containsExactly(pa.get(1), pb.get(0));
        assertThat(d.writeOffsets()).containsExactly(2, 3);
        assertThat(d.indptrs().lastPageLen()).containsExactly(3, 4);
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void refusedAdmitLeavesNoTraceAndNamesTheStreamThatRanShort() {
        KvHarness h = new KvHarness(6, 4);
        h.kv.ingestRequest("a", null);
        h.kv.ingestRequest("b", null);
        h.extend("main", 1, spans("a", 2));
        int free = h.free();
        List<Integer> pagesA = new ArrayList<>(h.stream("a", "main").pages);

        KVStep big = step(new Segment("a", "main", 6), new Segment("b", "main", 16));
        StepContext c = ctx(List.of("a", "b"), PREFILL);
        AdmitOutcome o = h.kv.admit(big, c);
        assertThat(o.ok()).isFalse();
        assertThat(o.reason()).isInstanceOfSatisfying(AllocationFailed.class, f -> {
            assertThat(f.pagesShort()).isEqualTo(1);
            assertThat(f.requestId()).isEqualTo("b");
            assertThat(f.label()).isEqualTo("main");
            assertThat(f.terminal()).isFalse();
        });
        h.kv.rollbackAdmit(big, c);
        assertThat(h.free()).isEqualTo(free);
        assertThat(h.stream("a", "main").pages).isEqualTo(pagesA);
        assertThat(h.stream("a", "main").stepInFlight).isFalse();
        assertThat(h.stream("b", "main").pages).isEmpty();
        h.kv.assertPagesConserved();
    }

    @Test
    void admitRetriedAllocatesNothingExtraAndRollbackReturnsOnlyFreshPages() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, spans("a", 3));
        List<Integer> held = new ArrayList<>(h.stream("a", "main").pages);
        int free = h.free();

        KVStep s = step(new Segment("a", "main", 6));
        StepContext c = ctx(List.of("a"), PREFILL);
        assertThat(h.kv.admit(s, c).ok()).isTrue();
        int afterFirst = h.free();
        List<Integer> pages = new ArrayList<>(h.stream("a", "main").pages);
        assertThat(afterFirst).isEqualTo(free - 2);
        assertThat(h.kv.admit(s, c).ok()).isTrue();
        assertThat(h.free()).isEqualTo(afterFirst);
        assertThat(h.stream("a", "main").pages).isEqualTo(pages);

        KVStep again = step(new Segment("a", "main", 6));
        assertThat(h.kv.admit(again, c).ok()).isTrue();
        h.kv.rollbackAdmit(again, c);
        assertThat(h.free()).isEqualTo(afterFirst);
        assertThat(h.stream("a", "main").stepInFlight).isTrue();

        h.kv.rollbackAdmit(s, c);
        assertThat(h.free()).isEqualTo(free);
        assertThat(h.stream("a", "main").pages).isEqualTo(held);
        assertThat(h.stream("a", "main").stepInFlight).isFalse();
        h.kv.assertPagesConserved();
    }

    @Test
    void aStepThatDoesNotCommitIsWrittenButNotCountedAndItsPagesStay() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, spans("a", 2));
        KVStep peek = KVStep.builder().segments(List.of(new Segment("a", "main", 5))).commit(false).build();
        StepContext c = ctx(List.of("a"), PREFILL);
        KVPlanOutputs out = h.run(peek, c, Map.of(new StreamLabel("a", "main"), KvHarness.range(50, 5)));
        assertThat(out.get("main").views().get(0).length()).isEqualTo(7);
        assertThat(h.stream("a", "main").storedLen).isEqualTo(2);
        assertThat(h.stream("a", "main").pages).hasSize(2);
        int free = h.free();
        h.extend("main", 60, spans("a", 5));
        assertThat(h.free()).isEqualTo(free);
        h.verifyAll();
    }

    @Test
    void sinkAndPaddingRowsReserveNothingAndWriteToTheSinkPage() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        StepContext c = ctx(List.of("a"), PREFILL);
        c.setPaddedRequestIds(List.of("a", "-1"));
        KVStep s = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 2), new Segment("-1", "main", 2), new Segment("a", "aux", 3)))
                .sink(Set.of(new StreamLabel("a", "aux")))
                .build();
        int free = h.free();
        KVPlanOutputs out = h.run(s, c, Map.of(new StreamLabel("a", "main"), new int[] {1, 2}));
        assertThat(h.free()).isEqualTo(free - 1);
        assertThat(h.stream("a", "aux")).isNull();
        KVPlanOutput main = out.get("main");
        SequenceView pad = main.views().get(1);
        assertThat(pad.sink()).isTrue();
        assertThat(pad.pageIdxs()).containsOnly(PageArena.SINK_PAGE);
        assertThat(main.writePages()).containsExactly(h.stream("a", "main").pages.get(0), h.stream("a", "main").pages.get(0),
                PageArena.SINK_PAGE, PageArena.SINK_PAGE);
        assertThat(out.get("aux").writePages()).containsOnly(PageArena.SINK_PAGE);
        assertThat(out.get("aux").indptrs().lastPageLen()).containsExactly(3);
        assertThat(h.stream("a", "main").storedLen).isEqualTo(2);
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void combinedLabelsPlanLabelMajorAndOtherLabelsKeepTheirOwn() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.kv.ingestRequest("b", null);
        KVStep s = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 2), new Segment("a", "ctx", 1), new Segment("b", "main", 1),
                        new Segment("a", "cfg", 3), new Segment("b", "cfg", 2)))
                .combinedLabels(Map.of(List.of("main", "cfg"), "joint"))
                .build();
        KVPlanOutputs out = h.run(s, ctx(List.of("a", "b"), PREFILL), Map.of());
        assertThat(out.byLabel().keySet()).containsExactly("joint", "ctx");
        assertThat(out.get("joint").views()).extracting(v -> v.requestId() + "/" + v.label())
                .containsExactly("a/main", "b/main", "a/cfg", "b/cfg");
        assertThat(out.get("joint").indptrs().qoIndptr()).containsExactly(0, 2, 3, 6, 8);
        h.verifyAll();

        KVStep missing = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 1)))
                .combinedLabels(Map.of(List.of("main", "cfg"), "joint"))
                .build();
        StepContext c = ctx(List.of("a"), PREFILL);
        assertThat(h.kv.admit(missing, c).ok()).isTrue();
        assertThatThrownBy(() -> h.kv.plan(missing, c)).hasMessageContaining("'cfg', which has no segments");
    }

    @Test
    void zeroSpanSegmentReadsItsStreamWithoutReservingOrCounting() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, spans("a", 4));
        int free = h.free();
        KVPlanOutputs out = h.run(step(new Segment("a", "main", 0)), ctx(List.of("a"), PREFILL), Map.of());
        assertThat(h.free()).isEqualTo(free);
        assertThat(out.get("main").views().get(0).length()).isEqualTo(4);
        assertThat(out.get("main").indptrs().qoIndptr()).containsExactly(0, 0);
        assertThat(h.stream("a", "main").storedLen).isEqualTo(4);
    }

    @Test
    void ingestIsIdempotentAndRemoveToleratesUnknownIds() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, spans("a", 5));
        h.kv.ingestRequest("a", null);
        assertThat(h.stream("a", "main").storedLen).isEqualTo(5);
        h.kv.removeRequest("nobody");
        h.kv.removeRequest("a");
        assertThat(h.free()).isEqualTo(15);
        h.kv.removeRequest("a");
        h.kv.assertPagesConserved();
    }

    @Test
    void resetKeepsPagesAsSpareUnlessAskedToFree() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, spans("a", 6));
        long resetGen = h.stream("a", "main").resetGeneration;
        h.kv.resetRequest("a", false);
        assertThat(h.stream("a", "main").storedLen).isZero();
        assertThat(h.stream("a", "main").pages).hasSize(2);
        assertThat(h.stream("a", "main").resetGeneration).isGreaterThan(resetGen);
        h.kv.resetRequest("a", true);
        assertThat(h.stream("a", "main").pages).isEmpty();
        assertThat(h.free()).isEqualTo(15);
        h.kv.postWarmupValidate();
    }

    @Test
    void writeKvChecksTheTokenCountAgainstThePlan() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        KVStep s = step(new Segment("a", "main", 3));
        StepContext c = ctx(List.of("a"), PREFILL);
        h.kv.admit(s, c);
        h.kv.plan(s, c);
        var k = h.device.zeros(org.mstar.device.DType.F32, 2, KvHarness.HEADS, KvHarness.HEAD_DIM);
        assertThatThrownBy(() -> h.kv.writeKv(k, k, 0, "main")).hasMessageContaining("writes 3 tokens");
        assertThatThrownBy(() -> h.kv.writeKv(k, k, 0, "other")).hasMessageContaining("no KV plan for label 'other'");
        assertThat(h.kv.pool().shape()).containsExactly(2, 16, 2, 4, KvHarness.HEADS, KvHarness.HEAD_DIM);
    }
}
