package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.ctx;
import static org.mstar.resources.kv.KvHarness.range;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.resources.Fork;
import org.mstar.resources.KVStep;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/** Forks (eager copies), FIFO retention and pre-plan staging. */
class KVManagerForkRetentionTest {
    private static final StreamLabel A_MAIN = new StreamLabel("a", "main");
    private static final StreamLabel A_CFG = new StreamLabel("a", "cfg");

    @Test
    void postForkCopiesTheSourceAfterThisStepIsCounted() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.kv.ingestRequest("b", null);
        KVStep s = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 6), new Segment("b", "main", 3)))
                .postForks(List.of(new Fork("main", "cfg")))
                .forkRids(Set.of("a"))
                .build();
        KVPlanOutputs out = h.run(s, ctx(List.of("a", "b"), PREFILL),
                Map.of(A_MAIN, range(10, 6), new StreamLabel("b", "main"), range(20, 3)));
        assertThat(out.forkRids()).containsExactly("a");
        assertThat(h.stream("a", "cfg").storedLen).isEqualTo(6);
        assertThat(h.stream("b", "cfg")).isNull();
        assertThat(h.stream("a", "cfg").pages).doesNotContainAnyElementsOf(h.stream("a", "main").pages);
        assertThat(h.stream("a", "cfg").resetGeneration).isEqualTo(1);
        h.verifyAll();

        // The branches now diverge.
        h.extend("cfg", 30, Map.of("a", 2));
        h.extend("main", 40, Map.of("a", 1));
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void preForkCopiesAtPlanSoTheTargetsSegmentAppendsToTheCopy() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 5));
        KVStep s = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 1), new Segment("a", "cfg", 2)))
                .preForks(List.of(new Fork("main", "cfg")))
                .build();
        KVPlanOutputs out = h.run(s, ctx(List.of("a"), PREFILL), Map.of(A_MAIN, new int[] {90}, A_CFG, new int[] {91, 92}));
        assertThat(out.get("cfg").views().get(0).length()).isEqualTo(7);
        assertThat(h.stream("a", "cfg").storedLen).isEqualTo(7);
        assertThat(h.stream("a", "main").storedLen).isEqualTo(6);
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void aForkTargetIsReservedAtAdmitSoARefusalLeavesNoTrace() {
        KvHarness h = new KvHarness(5, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 8));
        KVStep s = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 1)))
                .postForks(List.of(new Fork("main", "cfg")))
                .build();
        var o = h.kv.admit(s, ctx(List.of("a"), PREFILL));
        assertThat(o.ok()).isFalse();
        assertThat(h.stream("a", "cfg")).isNull();
        assertThat(h.free()).isEqualTo(2);
    }

    @Test
    void retentionKeepsTheProtectedHeadAndAWindowOfWholePages() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        RetentionPolicy policy = new RetentionPolicy(8, 6);
        h.extend("main", 0, Map.of("a", 6));
        int id = 6;
        for (int step = 0; step < 12; step++) {
            int span = 1 + step % 3;
            KVStep s = KVStep.builder()
                    .segments(List.of(new Segment("a", "main", span)))
                    .retention(Map.of(A_MAIN, policy))
                    .build();
            h.run(s, ctx(List.of("a"), PREFILL), Map.of(A_MAIN, range(id, span)));
            id += span;
            CacheStream st = h.stream("a", "main");
            int first = (6 + 3) / 4;
            assertThat(st.storedLen - 6 - 8 < 4 || st.storedLen / 4 - first == 0)
                    .as("window after step %d: stored %d", step, st.storedLen).isTrue();
            assertThat(st.position()).isEqualTo(id);
            h.verifyAll();
        }
        assertThat(h.stream("a", "main").released).isPositive();
        assertThat(h.oracle.get(A_MAIN).get(0)[1]).isZero();
        assertThat(h.oracle.get(A_MAIN).get(7)[1]).isEqualTo(7);
        assertThat(h.oracle.get(A_MAIN).get(8)[1]).isGreaterThan(8);
        h.kv.assertPagesConserved();
    }

    @Test
    void aPolicyMayProtectOnlyCommittedTokens() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        KVStep s = KVStep.builder().segments(List.of(new Segment("a", "main", 3)))
                .retention(Map.of(A_MAIN, new RetentionPolicy(8, 5))).build();
        StepContext c = ctx(List.of("a"), PREFILL);
        h.kv.admit(s, c);
        h.kv.plan(s, c);
        assertThatThrownBy(() -> h.kv.commit(s, c)).hasMessageContaining("protects 5 tokens but holds only 3");
    }

    @Test
    void protectPrefixAndReleaseOldestByHand() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 0, Map.of("a", 17));
        h.kv.protectPrefix("a", "main", 5);
        assertThat(h.kv.releaseOldest("a", "main", 10)).isEqualTo(2);
        h.oracle.get(A_MAIN).subList(8, 16).clear();
        assertThat(h.stream("a", "main").storedLen).isEqualTo(9);
        assertThat(h.stream("a", "main").released).isEqualTo(8);
        h.verifyAll();
        assertThatThrownBy(() -> h.kv.protectPrefix("a", "main", 4)).hasMessageContaining("cannot change");

        KVStep s = KVStep.builder().segments(List.of(new Segment("a", "main", 1))).build();
        h.kv.admit(s, ctx(List.of("a"), PREFILL));
        assertThatThrownBy(() -> h.kv.releaseOldest("a", "main", 1)).hasMessageContaining("busy");
    }

    private static StepContext preplanCtx(List<String> rids, int slot) {
        StepContext c = new StepContext(rids, PREFILL, slot, false);
        c.setSlotLease(new SlotLease(slot, null));
        c.setPreplan(true);
        return c;
    }

    @Test
    void aMatchingStepPromotesTheStagedPlanWithoutReplanning() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 4));
        List<Segment> segs = List.of(new Segment("a", "main", 1), new Segment("a", "cfg", 1));
        KVStep staged = KVStep.builder().segments(segs).preForks(List.of(new Fork("main", "cfg"))).build();
        StepContext pre = preplanCtx(List.of("a"), 1);
        assertThat(h.kv.admit(staged, pre).ok()).isTrue();
        KVPlanOutputs planned = h.kv.plan(staged, pre);
        int free = h.free();

        KVStep real = KVStep.builder().segments(segs).preForks(List.of(new Fork("main", "cfg"))).build();
        StepContext now = new StepContext(List.of("a"), PREFILL, 1, false);
        now.setSlotLease(new SlotLease(1, null));
        assertThat(h.kv.admit(real, now).ok()).isTrue();
        assertThat(h.free()).isEqualTo(free);
        h.oracle.put(A_CFG, new ArrayList<>(h.oracle.get(A_MAIN)));
        KVPlanOutputs promoted = h.planWriteCommit(real, now, Map.of(A_MAIN, new int[] {50}, A_CFG, new int[] {51}));
        assertThat(promoted).isSameAs(planned);
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void aDifferentStepClearsTheStagedPlanAndUndoesItsSideEffects() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 6));
        h.extend("cfg", 1, Map.of("a", 2));
        CacheStream cfgBefore = h.stream("a", "cfg");
        int storedBefore = cfgBefore.storedLen;
        long genBefore = cfgBefore.generation;
        long resetBefore = cfgBefore.resetGeneration;
        int free = h.free();

        KVStep staged = KVStep.builder()
                .segments(List.of(new Segment("a", "main", 1), new Segment("a", "side", 2)))
                .preForks(List.of(new Fork("main", "cfg")))
                .build();
        StepContext pre = preplanCtx(List.of("a"), 0);
        assertThat(h.kv.admit(staged, pre).ok()).isTrue();
        h.kv.plan(staged, pre);
        assertThat(h.stream("a", "cfg").storedLen).isEqualTo(6);
        assertThat(h.stream("a", "side")).isNotNull();

        KVStep other = KVStep.builder().segments(List.of(new Segment("a", "main", 2))).build();
        StepContext now = ctx(List.of("a"), PREFILL);
        assertThat(h.kv.admit(other, now).ok()).isTrue();
        assertThat(h.stream("a", "side")).isNull();
        CacheStream cfg = h.stream("a", "cfg");
        assertThat(cfg.storedLen).isEqualTo(storedBefore);
        assertThat(cfg.generation).isEqualTo(genBefore + 1); // +1: the staged admit topped its pages up
        assertThat(cfg.resetGeneration).isEqualTo(resetBefore);
        assertThat(cfg.stepInFlight).isFalse();
        // Span pages the staged step reserved on existing streams stay; the created stream's are back.
        assertThat(h.free()).isEqualTo(free - 1);
        h.planWriteCommit(other, now, Map.of(A_MAIN, new int[] {70, 71}));
        h.verifyAll();
        h.kv.assertPagesConserved();
    }
}
