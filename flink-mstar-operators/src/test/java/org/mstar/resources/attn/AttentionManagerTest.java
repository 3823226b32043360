package org.mstar.resources.attn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.BucketKey;
import org.mstar.resources.KVPlanFixture;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.KVPlanOutputs;
import org.mstar.resources.kv.SequenceView;

class AttentionManagerTest {
    private static final int HEAD_DIM = 16;
    private static final int MAX_SEQ_LEN = 16;
    private final CpuDevice device = new CpuDevice(1);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    private AttentionManager manager(AttentionConfig config) {
        return new AttentionManager(config, HEAD_DIM, MAX_SEQ_LEN, device);
    }

    private static StepContext ctx(KVPlanOutputs kv, int slot, String... rids) {
        StepContext ctx = new StepContext(List.of(rids), "mixed", slot, false);
        ctx.planResults().put("kv", kv);
        return ctx;
    }

    /** A ragged batch on 4-token pages: a's first chunk of 5, b's decode at 6, c's second chunk of 3 after 4. */
    private static KVPlanOutputs ragged() {
        return KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 5)
                .view("main", "b", "main", 6, 1)
                .view("main", "c", "main", 4, 3).build();
    }

    private static AttentionStep step(boolean causal, boolean contextOnly) {
        return new AttentionStep(List.of(new Segment("a", "main", 5), new Segment("b", "main", 1),
                new Segment("c", "main", 3)), causal, contextOnly);
    }

    @Test
    void plansTheKvPageTablesOnTheDeviceForARaggedBatch() {
        AttentionManager attn = manager(new AttentionConfig("kv"));

        PagedAttentionPlan p = attn.plan(step(true, false), ctx(ragged(), 0, "a", "b", "c")).paged("main");

        assertThat(p.rows()).isEqualTo(3);
        assertThat(device.toInts(p.qoIndptr())).containsExactly(0, 5, 6, 9);
        // a: 5 tokens on pages 1,2; b: 7 on 3,4; c: 7 on 5,6
        assertThat(device.toInts(p.kvIndptr())).containsExactly(0, 2, 4, 6);
        assertThat(device.toInts(p.kvIndices())).containsExactly(1, 2, 3, 4, 5, 6);
        assertThat(device.toInts(p.lastPageLen())).containsExactly(1, 3, 3);
        assertThat(p.pageSize()).isEqualTo(4);
        assertThat(p.totalQo()).isEqualTo(9);
        assertThat(p.maxQoLen()).isEqualTo(5);
        assertThat(p.maxKvLen()).isEqualTo(7);
        assertThat(p.isDecode()).isFalse();
    }

    @Test
    void masksComeFromTheStepAndTheConfig() {
        AttentionManager global = manager(new AttentionConfig("kv"));
        AttentionManager windowed = manager(new AttentionConfig("kv").withSlidingWindow(4096).withSmScale(0.5));

        PagedAttentionPlan causal = global.plan(step(true, false), ctx(ragged(), 0, "a", "b", "c")).paged("main");
        PagedAttentionPlan bidirectional = windowed.plan(step(false, true), ctx(ragged(), 0, "a", "b", "c")).paged("main");

        assertThat(causal.causal()).isTrue();
        assertThat(causal.contextOnly()).isFalse();
        assertThat(causal.windowLeft()).isEqualTo(-1);
        assertThat(causal.smScale()).isEqualTo((float) (1 / Math.sqrt(HEAD_DIM)));
        assertThat(bidirectional.causal()).isFalse();
        assertThat(bidirectional.contextOnly()).isTrue();
        assertThat(bidirectional.windowLeft()).isEqualTo(4095);
        assertThat(bidirectional.smScale()).isEqualTo(0.5f);
    }

    @Test
    void aDecodeOnlyBatchPlansTheDecodeKernel() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 3, 1)
                .view("main", "b", "main", 8, 1).build();

        PagedAttentionPlan p = attn.plan(new AttentionStep(), ctx(kv, 0, "a", "b")).paged("main");

        assertThat(p.isDecode()).isTrue();
        assertThat(device.toInts(p.lastPageLen())).containsExactly(4, 1);
        assertThat(attn.lastRows("main")).containsExactly(0, 1);
    }

    @Test
    void oneKernelPlanPerKvPlanLabel() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 2)
                .view("cfg", "a", "cfg", 0, 2)
                .view("cfg", "a", "img", 0, 3).build();

        AttentionPlan plan = attn.plan(new AttentionStep(), ctx(kv, 0, "a"));

        assertThat(plan.labels()).containsExactly("main", "cfg");
        assertThat(device.toInts(plan.paged("cfg").qoIndptr())).containsExactly(0, 2, 5);
        assertThat(plan.lastRows("cfg")).containsExactly(1, 4);
        assertThatThrownBy(() -> plan.paged("ctx")).hasMessageContaining("'ctx'");
    }

    @Test
    void selectLastHiddenGathersEachSequencesLastToken() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        attn.plan(step(true, false), ctx(ragged(), 0, "a", "b", "c"));
        float[] h = new float[9 * 2];
        for (int i = 0; i < h.length; i++) {
            h[i] = i;
        }
        Tensor hidden = device.fromFloats(h, DType.F32, 9, 2);
        Tensor out = device.zeros(DType.F32, 3, 2);

        attn.selectLastHidden(hidden, "main", out);

        assertThat(attn.lastRows("main")).containsExactly(4, 5, 8);
        assertThat(device.toFloats(out)).containsExactly(8, 9, 10, 11, 16, 17);
    }

    @Test
    void aSequenceComputingNothingHasNoLastRow() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 0, 2)
                .view("main", "ctx", "main", 6, 0).build();
        attn.plan(new AttentionStep(), ctx(kv, 0, "a", "ctx"));

        assertThat(attn.lastRows("main")).containsExactly(1, -1);
        assertThatThrownBy(() -> attn.selectLastHidden(device.zeros(DType.F32, 2, 2), "main", device.zeros(DType.F32, 2, 2)))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("computing no token");
    }

    @Test
    void runChecksTheQueryRowsAgainstThePlan() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        attn.plan(step(true, false), ctx(ragged(), 0, "a", "b", "c"));

        assertThatThrownBy(() -> attn.run(device.zeros(DType.F32, 8, 1, HEAD_DIM), "main", 0,
                device.zeros(DType.F32, 1, 8, 2, 4, 1, HEAD_DIM), device.zeros(DType.F32, 8, 1, HEAD_DIM)))
                .hasMessageContaining("8 rows but label 'main' planned 9 tokens");
    }

    @Test
    void nothingRunsBeforeAPlan() {
        AttentionManager attn = manager(new AttentionConfig("kv"));

        assertThatThrownBy(() -> attn.lastRows("main")).hasMessageContaining("has not planned");
        assertThatThrownBy(() -> attn.plan(new AttentionStep(), new StepContext(List.of("a"), "w", 0, false)))
                .hasMessageContaining("resource 'kv' (KVPlanOutputs)");
        assertThat(attn.dependsOn()).containsExactly("kv");
    }

    @Test
    void aLeasedPlanRewritesTheStaticPageTablesOfItsBucketAndSlot() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        BucketKey bucket = new BucketKey("decode", 2, 2);
        StepContext first = ctx(KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 4, 1)
                .view("main", "b", "main", 8, 1).build(), 0, "a", "b");
        first.setSlotLease(new SlotLease(0, bucket));
        StepContext second = ctx(KVPlanFixture.pageSize(4)
                .view("main", new SequenceView("a", "main", 3, 1, new int[] {6}, 0, false))
                .view("main", new SequenceView("b", "main", 4, 1, new int[] {7}, 0, false)).build(), 0, "a", "b");
        second.setSlotLease(new SlotLease(0, bucket));

        PagedAttentionPlan p1 = attn.plan(new AttentionStep(), first).paged("main");
        int[] tables1 = device.toInts(p1.kvIndices());
        PagedAttentionPlan p2 = attn.plan(new AttentionStep(), second).paged("main");

        // 2 rows x 16 tokens / 4-token pages: room for 8 page ids, the tail stale
        assertThat(tables1).containsExactly(1, 2, 3, 4, 5, 0, 0, 0);
        assertThat(p2.kvIndices()).isSameAs(p1.kvIndices());
        assertThat(p2.qoIndptr()).isSameAs(p1.qoIndptr());
        assertThat(device.toInts(p2.kvIndices())).containsExactly(6, 7, 3, 4, 5, 0, 0, 0);
        assertThat(device.toInts(p2.kvIndptr())).containsExactly(0, 1, 2);
        assertThat(device.toInts(p2.lastPageLen())).containsExactly(3, 4);
        attn.cleanup();
    }

    @Test
    void aLeasedPlanAttendsThePlannedTokensOfAPaddedQuery() {
        KVPlanOutputs kv = KVPlanFixture.pageSize(4)
                .view("main", "a", "main", 2, 3)
                .view("main", "b", "main", 5, 2).build();
        float[] pool = new float[8 * 2 * 4 * HEAD_DIM];
        for (int i = 0; i < pool.length; i++) {
            pool[i] = (float) Math.sin(i * 0.7);
        }
        Tensor kvPool = device.fromFloats(pool, DType.F32, 1, 8, 2, 4, 1, HEAD_DIM);
        float[] q = new float[8 * HEAD_DIM];
        for (int i = 0; i < q.length; i++) {
            q[i] = (float) Math.cos(i * 0.3);
        }
        AttentionManager eager = manager(new AttentionConfig("kv"));
        eager.plan(new AttentionStep(), ctx(kv, 0, "a", "b"));
        Tensor eagerOut = device.zeros(DType.F32, 5, 1, HEAD_DIM);
        eager.run(device.fromFloats(q, DType.F32, 8, 1, HEAD_DIM).rows(0, 5), "main", 0, kvPool, eagerOut);
        AttentionManager leased = manager(new AttentionConfig("kv"));
        StepContext ctx = ctx(kv, 0, "a", "b");
        ctx.setSlotLease(new SlotLease(0, new BucketKey("prefill", 2, 8)));
        leased.plan(new AttentionStep(), ctx);
        Tensor leasedOut = device.zeros(DType.F32, 8, 1, HEAD_DIM);

        leased.run(device.fromFloats(q, DType.F32, 8, 1, HEAD_DIM), "main", 0, kvPool, leasedOut);

        assertThat(Arrays.copyOf(device.toFloats(leasedOut), 5 * HEAD_DIM)).containsExactly(device.toFloats(eagerOut));
        assertThatThrownBy(() -> eager.run(device.zeros(DType.F32, 8, 1, HEAD_DIM), "main", 0, kvPool, leasedOut))
                .hasMessageContaining("8 rows but label 'main' planned 5 tokens");
    }

    @Test
    void aMatchingRealPlanPromotesThePreplanAndADifferentOneReplans() {
        AttentionManager attn = manager(new AttentionConfig("kv"));
        StepContext pre = ctx(ragged(), 1, "a", "b", "c");
        pre.setPreplan(true);

        AttentionPlan staged = attn.plan(step(true, false), pre);
        assertThatThrownBy(() -> attn.currentPlan()).hasMessageContaining("has not planned");
        assertThat(attn.plan(step(true, false), ctx(ragged(), 1, "a", "b", "c"))).isSameAs(staged);

        attn.plan(step(true, false), pre);
        AttentionPlan replanned = attn.plan(step(true, false), ctx(ragged(), 0, "a", "b", "c"));
        assertThat(replanned).isNotSameAs(staged).isSameAs(attn.currentPlan());
    }
}
