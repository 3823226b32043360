package org.mstar.resources.position;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.BucketKey;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.KVPlanFixture;
import org.mstar.resources.PosBackend;
import org.mstar.resources.PosScheme;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionStep;
import org.mstar.resources.Publication;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.KVPlanOutputs;

class RopeManagerTest {
    private static final int HEAD_DIM = 8;
    private final CpuDevice device = new CpuDevice(1);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    private RopeManager sequential() {
        return new RopeManager(new PositionConfig("kv"), HEAD_DIM, device);
    }

    private RopeManager block(int blockStep) {
        return new RopeManager(new PositionConfig("kv", PosBackend.ROPE, PosScheme.BLOCK, blockStep, null, false, 1.0,
                10000.0, null, null, null), HEAD_DIM, device);
    }

    private static StepContext ctx(KVPlanOutputs kv, String... rids) {
        StepContext ctx = new StepContext(List.of(rids), "prefill", 0, false);
        ctx.planResults().put("kv", kv);
        return ctx;
    }

    private static PositionStep step(Segment... segments) {
        return new PositionStep(List.of(segments), null, null);
    }

    private int[] ids(Map<String, Tensor> plan, String label) {
        return device.toInts(plan.get(label));
    }

    /** Plans and commits one step: what a runner does around the forward. */
    private Map<String, Tensor> run(RopeManager pos, PositionStep step, StepContext ctx) {
        Map<String, Tensor> plan = pos.plan(step, ctx);
        pos.commit(step, ctx);
        return plan;
    }

    @Test
    void sequentialIdsCountFromEachCounterAndCommitAdvancesBySpan() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        run(pos, step(new Segment("b", "main", 5)), ctx(KVPlanFixture.pageSize(4).view("main", "b", "main", 0, 5).build(), "b"));

        // a ragged batch: a's first prefill chunk of 3, b's decode at 5
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 3)
                .view("main", "b", "main", 5, 1).build();
        Map<String, Tensor> plan = run(pos, step(new Segment("a", "main", 3), new Segment("b", "main", 1)), ctx(kv, "a", "b"));

        assertThat(ids(plan, "main")).containsExactly(0, 1, 2, 5);
        assertThat(pos.position("a", "main")).isEqualTo(3);
        assertThat(pos.position("b", "main")).isEqualTo(6);
    }

    @Test
    void blockIdsRepeatTheCounterAndCommitAdvancesByBlockStepOnlyWithNewTokens() {
        RopeManager pos = block(2);
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 3)
                .view("main", "b", "main", 0, 0).build();
        PositionStep s = step(new Segment("a", "main", 3), new Segment("b", "main", 0));

        assertThat(ids(run(pos, s, ctx(kv, "a", "b")), "main")).containsExactly(0, 0, 0);
        assertThat(pos.position("a", "main")).isEqualTo(2);
        assertThat(pos.position("b", "main")).isZero();

        KVPlanOutputs next = KVPlanFixture.pageSize(4).view("main", "a", "main", 3, 2).build();
        assertThat(ids(run(pos, step(new Segment("a", "main", 2)), ctx(next, "a")), "main")).containsExactly(2, 2);
        assertThat(pos.position("a", "main")).isEqualTo(4);
    }

    @Test
    void explicitAdvanceOverridesTheScheme() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 3)
                .view("main", "b", "main", 0, 2).build();
        PositionStep s = new PositionStep(List.of(new Segment("a", "main", 3), new Segment("b", "main", 2)), null,
                List.of(7, 0));

        run(pos, s, ctx(kv, "a", "b"));

        assertThat(pos.position("a", "main")).isEqualTo(7);
        assertThat(pos.position("b", "main")).isZero();
    }

    @Test
    void advanceMustHaveOneEntryPerSegment() {
        RopeManager pos = sequential();
        KVPlanOutputs kv = KVPlanFixture.pageSize(4).view("main", "a", "main", 0, 3).build();
        PositionStep s = new PositionStep(List.of(new Segment("a", "main", 3)), null, List.of(1, 2));
        StepContext ctx = ctx(kv, "a");
        pos.plan(s, ctx);

        assertThatThrownBy(() -> pos.commit(s, ctx)).hasMessageContaining("2 entries for 1 segments");
    }

    @Test
    void posIdsOverrideOneLabelAndLeaveTheOthersToTheScheme() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 3)
                .view("img", "a", "img", 0, 2).build();
        PositionStep s = new PositionStep(List.of(new Segment("a", "main", 3), new Segment("a", "img", 2)),
                Map.of("img", new int[] {40, 41}), null);

        Map<String, Tensor> plan = pos.plan(s, ctx(kv, "a"));

        assertThat(ids(plan, "main")).containsExactly(0, 1, 2);
        assertThat(ids(plan, "img")).containsExactly(40, 41);
        assertThat(pos.posIds("img")).isSameAs(plan.get("img"));
    }

    @Test
    void posIdsOfTheWrongLengthOrForAnUnplannedLabelAreRefused() {
        RopeManager pos = sequential();
        KVPlanOutputs kv = KVPlanFixture.pageSize(4).view("main", "a", "main", 0, 3).build();
        List<Segment> segs = List.of(new Segment("a", "main", 3));

        assertThatThrownBy(() -> pos.plan(new PositionStep(segs, Map.of("main", new int[] {1, 2}), null), ctx(kv, "a")))
                .hasMessageContaining("2 ids for 3 planned tokens");
        assertThatThrownBy(() -> pos.plan(new PositionStep(segs, Map.of("cfg", new int[] {1}), null), ctx(kv, "a")))
                .hasMessageContaining("'cfg'");
    }

    @Test
    void combinedLabelsFollowKvPackingOrder() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        pos.admitRetrieve("a", "llm", "decode", new PublishedPositionInfo(Map.of("main", 10, "cfg", 20)));
        pos.admitRetrieve("b", "llm", "decode", new PublishedPositionInfo(Map.of("main", 30, "cfg", 40)));
        // label-major: every "main" view in batch order, then every "cfg" view
        KVPlanOutputs kv = KVPlanFixture.pageSize(16)
                .view("both", "a", "main", 10, 1)
                .view("both", "b", "main", 30, 2)
                .view("both", "a", "cfg", 20, 1)
                .view("both", "b", "cfg", 40, 2).build();
        PositionStep s = step(new Segment("a", "main", 1), new Segment("a", "cfg", 1), new Segment("b", "main", 2),
                new Segment("b", "cfg", 2));

        assertThat(ids(run(pos, s, ctx(kv, "a", "b")), "both")).containsExactly(10, 30, 31, 20, 40, 41);
        assertThat(pos.publish("b").counters()).isEqualTo(Map.of("main", 32, "cfg", 42));
    }

    @Test
    void preForksCopyCountersAtPlanAndPostForksAtCommitAfterTheAdvance() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.applyCachedPrefix("a", "llm", "prefill", Map.of(), new CachedPrefix(4));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 4, 2)
                .view("cfg", "a", "cfg", 4, 2)
                .preFork("main", "cfg")
                .postFork("main", "img").build();
        PositionStep s = step(new Segment("a", "main", 2), new Segment("a", "cfg", 2));
        StepContext ctx = ctx(kv, "a");

        Map<String, Tensor> plan = pos.plan(s, ctx);
        assertThat(pos.position("a", "cfg")).isEqualTo(4);
        assertThat(ids(plan, "cfg")).containsExactly(4, 5);
        assertThat(pos.position("a", "img")).isZero();

        pos.commit(s, ctx);
        assertThat(pos.position("a", "main")).isEqualTo(6);
        assertThat(pos.position("a", "cfg")).isEqualTo(6);
        assertThat(pos.position("a", "img")).isEqualTo(6);
    }

    @Test
    void forksApplyOnlyToTheRowsKvForked() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        pos.admitRetrieve("a", "llm", "prefill", new PublishedPositionInfo(Map.of("main", 3)));
        pos.admitRetrieve("b", "llm", "prefill", new PublishedPositionInfo(Map.of("main", 5)));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 3, 1)
                .view("main", "b", "main", 5, 1)
                .preFork("main", "cfg").forkRids("b").build();

        pos.plan(step(new Segment("a", "main", 1), new Segment("b", "main", 1)), ctx(kv, "a", "b"));

        assertThat(pos.publish("a").counters()).doesNotContainKey("cfg");
        assertThat(pos.position("b", "cfg")).isEqualTo(5);
    }

    @Test
    void clearingAPreplanUndoesItsForksAndRemovesTargetsThatHadNoCounter() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.admitRetrieve("a", "llm", "decode", new PublishedPositionInfo(Map.of("main", 7, "cfg", 2)));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 7, 1)
                .preFork("main", "cfg")
                .preFork("main", "img").build();
        StepContext pre = ctx(kv, "a");
        pre.setPreplan(true);

        pos.plan(step(new Segment("a", "main", 1)), pre);
        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 7, "cfg", 7, "img", 7));

        pos.clearPreplan();
        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 7, "cfg", 2));
    }

    @Test
    void theMatchingRealPlanPromotesTheStagedPreplanWithoutForkingAgain() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.admitRetrieve("a", "llm", "decode", new PublishedPositionInfo(Map.of("main", 7)));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4).view("main", "a", "main", 7, 1).preFork("main", "cfg").build();
        PositionStep s = step(new Segment("a", "main", 1));
        StepContext pre = ctx(kv, "a");
        pre.setPreplan(true);
        Map<String, Tensor> staged = pos.plan(s, pre);
        assertThat(pos.posIds("main")).isNull();

        Map<String, Tensor> real = pos.plan(s, ctx(kv, "a"));
        pos.clearPreplan(); // nothing staged any more: the promoted forks stand

        assertThat(real).isSameAs(staged);
        assertThat(ids(real, "main")).containsExactly(7);
        assertThat(pos.position("a", "cfg")).isEqualTo(7);
    }

    @Test
    void aDifferentRealStepDropsTheStagedPreplanAndPlansInline() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        KVPlanOutputs staged = KVPlanFixture.pageSize(4).view("main", "a", "main", 0, 1).preFork("main", "cfg").build();
        StepContext pre = ctx(staged, "a");
        pre.setPreplan(true);
        pos.plan(step(new Segment("a", "main", 1)), pre);

        KVPlanOutputs other = KVPlanFixture.pageSize(4).view("main", "b", "main", 0, 2).build();
        Map<String, Tensor> plan = pos.plan(step(new Segment("b", "main", 2)), ctx(other, "b"));

        assertThat(ids(plan, "main")).containsExactly(0, 1);
        assertThat(pos.publish("a")).isNull();
    }

    @Test
    void retrieveIsMonotonic() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);

        assertThat(pos.capability(Publication.class)).isPresent();
        assertThat(pos.admitRetrieve("a", "llm", "decode", new PublishedPositionInfo(Map.of("main", 10))))
                .isEqualTo(AdmitOutcome.OK);
        pos.admitRetrieve("a", "llm", "decode", new PublishedPositionInfo(Map.of("main", 4, "cfg", 3)));
        pos.admitRetrieve("a", "llm", "decode", null);

        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 10, "cfg", 3));
    }

    @Test
    void publishedInfoMergesPerLabelMaximum() {
        PublishedPositionInfo info = new PublishedPositionInfo(Map.of("main", 10, "cfg", 1));
        PublishedPositionInfo copy = info.copy();

        info.update(new PublishedPositionInfo(Map.of("main", 3, "cfg", 8, "img", 2)));

        assertThat(info.counters()).isEqualTo(Map.of("main", 10, "cfg", 8, "img", 2));
        assertThat(copy.counters()).isEqualTo(Map.of("main", 10, "cfg", 1));
    }

    @Test
    void publishIsNullWithoutCounters() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);

        assertThat(pos.publish("a")).isNull();
        assertThat(pos.publish("unknown")).isNull();
    }

    @Test
    void cachedPrefixSetsTheMainCounterToTheAbsolutePrefixIdempotently() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);

        pos.applyCachedPrefix("a", "llm", "prefill", Map.of(), new CachedPrefix(256));
        pos.applyCachedPrefix("a", "llm", "prefill", Map.of(), new CachedPrefix(256));
        pos.applyCachedPrefix("a", "llm", "prefill", Map.of(), null);

        assertThat(pos.position("a", "main")).isEqualTo(256);
        KVPlanOutputs kv = KVPlanFixture.pageSize(128).view("main", "a", "main", 256, 2).build();
        assertThat(ids(pos.plan(step(new Segment("a", "main", 2)), ctx(kv, "a")), "main")).containsExactly(256, 257);
    }

    @Test
    void ingestIsIdempotentAndNeverClearsCounters() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        KVPlanOutputs kv = KVPlanFixture.pageSize(4).view("main", "a", "main", 0, 3).build();
        run(pos, step(new Segment("a", "main", 3)), ctx(kv, "a"));

        pos.ingestRequest("a", null);

        assertThat(pos.position("a", "main")).isEqualTo(3);
    }

    @Test
    void resetClearsCountersAndRemoveForgetsTheRequest() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.applyCachedPrefix("a", "llm", "prefill", Map.of(), new CachedPrefix(8));

        pos.resetRequest("a", false);
        assertThat(pos.position("a", "main")).isZero();
        pos.removeRequest("a");
        pos.removeRequest("never-seen");
        assertThat(pos.publish("a")).isNull();
    }

    @Test
    void paddingRowsGetIdsButNoCounters() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 1)
                .sinkView("main", "-1", "main", 1)
                .preFork("main", "cfg").postFork("main", "img").build();
        StepContext ctx = ctx(kv, "a");
        ctx.setPaddedRequestIds(List.of("a", "-1"));
        PositionStep s = step(new Segment("a", "main", 1), new Segment("-1", "main", 1));

        assertThat(ids(run(pos, s, ctx), "main")).containsExactly(0, 0);
        assertThat(pos.publish("-1")).isNull();
        assertThat(pos.position("a", "img")).isEqualTo(1);
    }

    @Test
    void sinkStreamsOfRealRowsDoNotAdvance() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 2)
                .sinkView("cfg", "a", "cfg", 2).build();

        run(pos, step(new Segment("a", "main", 2), new Segment("a", "cfg", 2)), ctx(kv, "a"));

        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 2));
    }

    @Test
    void forksTouchingASinkStreamAreSkippedAsKvSkipsThem() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.admitRetrieve("a", "llm", "decode", new PublishedPositionInfo(Map.of("main", 4)));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 4, 1)
                .sinkView("cfg", "a", "cfg", 1)
                .preFork("main", "cfg").build();

        pos.plan(step(new Segment("a", "main", 1), new Segment("a", "cfg", 1)), ctx(kv, "a"));

        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 4));
    }

    @Test
    void aLeasedPlanOverwritesTheStaticBufferOfItsBucketAndSlot() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        BucketKey bucket = new BucketKey("prefill", 1, 6);
        PositionStep s3 = step(new Segment("a", "main", 3));
        StepContext first = ctx(KVPlanFixture.pageSize(4).view("main", "a", "main", 0, 3).build(), "a");
        first.setSlotLease(new SlotLease(0, bucket));
        Tensor buffer = run(pos, s3, first).get("main");
        StepContext second = ctx(KVPlanFixture.pageSize(4).view("main", "a", "main", 3, 2).build(), "a");
        second.setSlotLease(new SlotLease(0, bucket));
        StepContext otherSlot = ctx(KVPlanFixture.pageSize(4).view("main", "a", "main", 5, 1).build(), "a");
        otherSlot.setSlotLease(new SlotLease(1, bucket));

        Tensor again = run(pos, step(new Segment("a", "main", 2)), second).get("main");
        Tensor slot1 = pos.plan(step(new Segment("a", "main", 1)), otherSlot).get("main");

        assertThat(again).isSameAs(buffer);
        assertThat(device.toInts(again)).containsExactly(3, 4, 2, 0, 0, 0);
        assertThat(slot1).isNotSameAs(buffer);
        assertThat(device.toInts(slot1)).containsExactly(5, 0, 0, 0, 0, 0);
    }

    @Test
    void aLeasedPlanMustFitItsBucket() {
        RopeManager pos = sequential();
        StepContext ctx = ctx(KVPlanFixture.pageSize(4).view("main", "a", "main", 0, 3).build(), "a");
        ctx.setSlotLease(new SlotLease(0, new BucketKey("decode", 2, 2)));

        assertThatThrownBy(() -> pos.plan(step(new Segment("a", "main", 3)), ctx)).hasMessageContaining("cannot grow");
    }

    @Test
    void applyQkRotatesQAndKAtThePlannedPositions() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.ingestRequest("b", null);
        pos.admitRetrieve("b", "llm", "decode", new PublishedPositionInfo(Map.of("main", 5)));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 3)
                .view("main", "b", "main", 5, 1).build();
        pos.plan(step(new Segment("a", "main", 3), new Segment("b", "main", 1)), ctx(kv, "a", "b"));
        float[] qs = ramp(4 * 2 * HEAD_DIM);
        float[] ks = ramp(4 * HEAD_DIM);
        Tensor q = device.fromFloats(qs, DType.F32, 4, 2, HEAD_DIM);
        Tensor k = device.fromFloats(ks, DType.F32, 4, 1, HEAD_DIM);
        Tensor expectedQ = device.fromFloats(qs, DType.F32, 4, 2, HEAD_DIM);
        Tensor expectedK = device.fromFloats(ks, DType.F32, 4, 1, HEAD_DIM);
        device.ops().rope(expectedQ, expectedK, device.fromInts(new int[] {0, 1, 2, 5}, 4), pos.ropeParams());

        pos.applyQk(q, k, "main");

        assertThat(device.toFloats(q)).containsExactly(device.toFloats(expectedQ));
        assertThat(device.toFloats(k)).containsExactly(device.toFloats(expectedK));
        assertThat(device.toFloats(q)).isNotEqualTo(qs);
    }

    @Test
    void applyQkTakesTheLeadingPlannedIdsForFewerRows() {
        RopeManager pos = sequential();
        pos.ingestRequest("a", null);
        pos.applyCachedPrefix("a", "llm", "prefill", Map.of(), new CachedPrefix(7));
        pos.plan(step(new Segment("a", "main", 3)), ctx(KVPlanFixture.pageSize(4).view("main", "a", "main", 7, 3).build(), "a"));
        float[] qs = ramp(2 * HEAD_DIM);
        Tensor q = device.fromFloats(qs, DType.F32, 2, 1, HEAD_DIM);
        Tensor k = device.fromFloats(qs, DType.F32, 2, 1, HEAD_DIM);
        Tensor expected = device.fromFloats(qs, DType.F32, 2, 1, HEAD_DIM);
        device.ops().rope(expected, device.fromFloats(qs, DType.F32, 2, 1, HEAD_DIM), device.fromInts(new int[] {7, 8}, 2),
                pos.ropeParams());

        pos.applyQk(q, k, "main");

        assertThat(device.toFloats(q)).containsExactly(device.toFloats(expected));
        Tensor tooMany = device.zeros(DType.F32, 4, 1, HEAD_DIM);
        assertThatThrownBy(() -> pos.applyQk(tooMany, tooMany, "main")).hasMessageContaining("planned 3 positions");
        assertThatThrownBy(() -> pos.applyQk(q, k, "cfg")).hasMessageContaining("no positions planned for label 'cfg'");
    }

    private static float[] ramp(int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) Math.sin(0.37 * i + 0.1);
        }
        return x;
    }

    @Test
    void planNeedsTheKvPlan() {
        RopeManager pos = sequential();

        assertThatThrownBy(() -> pos.plan(step(new Segment("a", "main", 1)), new StepContext(List.of("a"), "w", 0, false)))
                .hasMessageContaining("resource 'kv' (KVPlanOutputs)");
        assertThat(pos.dependsOn()).containsExactly("kv");
    }

    @Test
    void fingerprintCoversTheRopeParameters() {
        RopeManager a = sequential();
        RopeManager same = sequential();
        RopeManager otherTheta = new RopeManager(new PositionConfig("kv").withTheta(500000.0), HEAD_DIM, device);

        assertThat(a.fingerprint()).isEqualTo(same.fingerprint()).isNotEqualTo(otherTheta.fingerprint());
        assertThat(block(1).fingerprint()).isNotEqualTo(a.fingerprint());
    }

    @Test
    void rotaryDimDefaultsToTheKvHeadDim() {
        assertThat(sequential().ropeParams().rotaryDim()).isEqualTo(HEAD_DIM);
        assertThatThrownBy(() -> new RopeManager(new PositionConfig("kv", PosBackend.ROPE, PosScheme.SEQUENTIAL, 1, 16,
                false, 1.0, 10000.0, null, null, null), HEAD_DIM, device)).hasMessageContaining("rotary_dim 16");
    }
}
