package org.mstar.resources.lora;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdapterLibrary;
import org.mstar.resources.AdapterReqConfig;
import org.mstar.resources.AdapterSlotsBusy;
import org.mstar.resources.AdapterSpec;
import org.mstar.resources.AdapterStep;
import org.mstar.resources.AdapterTarget;
import org.mstar.resources.AdapterWeights;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;

/**
 * The adapter resource through admit, rollback, plan and remove: a slot per running adapter, a refusal naming the
 * request when none is free, weights padded into the slot with their scale, a load that fails failing its request
 * and freeing the slot, and each token's slot planned in segment order.
 */
class AdapterManagerTest {
    private final CpuDevice cpu = new CpuDevice(1);
    private AdapterManager manager;

    @AfterEach
    void close() {
        manager.cleanup();
        cpu.close();
    }

    /** Adapters "a" (rank 1), "b" (rank 2) and "broken" of one module, q_proj [3 → 2], in one layer. */
    private static final class Library implements AdapterLibrary {
        @Override
        public List<String> names() {
            return List.of("a", "b", "broken");
        }

        @Override
        public List<AdapterTarget> targets() {
            return List.of(new AdapterTarget("q_proj", 3, 2));
        }

        @Override
        public int layers() {
            return 1;
        }

        @Override
        public int maxRank() {
            return 2;
        }

        @Override
        public byte[] identity(String name) {
            return name.getBytes();
        }

        @Override
        public AdapterWeights load(String name) {
            return switch (name) {
                case "a" -> new AdapterWeights("a", 1, 0.5f, Map.of("q_proj", List.of(new float[] {1, 2, 3})),
                        Map.of("q_proj", List.of(new float[] {4, 5})));
                case "b" -> new AdapterWeights("b", 2, 2f, Map.of("q_proj", List.of(new float[] {1, 1, 1, 2, 2, 2})),
                        Map.of("q_proj", List.of(new float[] {1, 2, 3, 4})));
                default -> throw new UncheckedIOException(new IOException("disk gone"));
            };
        }
    }

    private AdapterManager manager(int slots) {
        manager = new AdapterManager(new AdapterSpec("adapters", Set.of("llm"), new Library(), slots), cpu, DType.F32);
        return manager;
    }

    private static AdapterStep step(Segment... segments) {
        return new AdapterStep(List.of(segments));
    }

    private static StepContext ctx(String... rids) {
        return new StepContext(List.of(rids), "generate", 0, false);
    }

    private static Segment row(String rid, int span) {
        return new Segment(rid, Segment.MAIN, span);
    }

    @Test
    void aRequestWaitsForASlotAndGetsTheLeastRecentlyUsedOnceFree() {
        AdapterManager m = manager(1);
        m.ingestRequest("r1", new AdapterReqConfig("a"));
        m.ingestRequest("r2", new AdapterReqConfig("b"));
        m.ingestRequest("base", null);

        assertThat(m.admit(step(row("r1", 3), row("base", 2)), ctx("r1", "base")).ok()).isTrue();
        AdapterStep both = step(row("r1", 1), row("r2", 2));
        AdmitOutcome refused = m.admit(both, ctx("r1", "r2"));
        assertThat(refused.reason()).isInstanceOf(AdapterSlotsBusy.class)
                .extracting(r -> ((AdapterSlotsBusy) r).requestId()).isEqualTo("r2");
        m.rollbackAdmit(both, ctx("r1", "r2"));
        assertThat(m.loads()).isEqualTo(1);

        m.removeRequest("r1");
        assertThat(m.admit(step(row("r2", 2)), ctx("r2")).ok()).isTrue();
        assertThat(m.loads()).isEqualTo(2);
        assertThat(m.evictions()).isEqualTo(1);
        // b's rank 2 fills the slot; its scale replaced a's
        assertThat(cpu.toFloats(m.a("q_proj", 0))).containsExactly(1, 1, 1, 2, 2, 2);
        assertThat(cpu.toFloats(m.b("q_proj", 0))).containsExactly(1, 2, 3, 4);
        assertThat(cpu.toFloats(m.scales())).containsExactly(2f);
    }

    @Test
    void aLowerRankIsPaddedWithZerosAndSharedByItsRequests() {
        AdapterManager m = manager(2);
        m.ingestRequest("r1", new AdapterReqConfig("a"));
        m.ingestRequest("r2", new AdapterReqConfig("a"));
        assertThat(m.admit(step(row("r1", 1), row("r2", 1)), ctx("r1", "r2")).ok()).isTrue();
        assertThat(m.loads()).isEqualTo(1);
        // slot 0 holds a: A [2, 3] with its second row zero, B [2, 2] with its second column zero
        assertThat(cpu.toFloats(m.a("q_proj", 0).rows(0, 1))).containsExactly(1, 2, 3, 0, 0, 0);
        assertThat(cpu.toFloats(m.b("q_proj", 0).rows(0, 1))).containsExactly(4, 0, 5, 0);
        assertThat(cpu.toFloats(m.scales())).containsExactly(0.5f, 0f);
    }

    @Test
    void aLoadThatFailsFailsItsRequestAndFreesTheSlot() {
        AdapterManager m = manager(1);
        m.ingestRequest("bad", new AdapterReqConfig("broken"));
        m.ingestRequest("good", new AdapterReqConfig("b"));
        AdmitOutcome failed = m.admit(step(row("bad", 2)), ctx("bad"));
        assertThat(failed.reason()).isInstanceOf(AdmitRuntimeError.class);
        assertThat(failed.reason().terminal()).isTrue();
        assertThat(((AdmitRuntimeError) failed.reason()).requestIds()).containsExactly("bad");
        assertThat(failed.reason().message()).contains("'broken'", "disk gone");

        assertThat(m.admit(step(row("good", 1)), ctx("good")).ok()).as("the slot is free again").isTrue();
        assertThat(m.evictions()).isZero();
    }

    @Test
    void eachTokenIsPlannedWithItsRequestsSlotAndPaddingRowsWithNone() {
        AdapterManager m = manager(2);
        m.ingestRequest("r1", new AdapterReqConfig("b"));
        m.ingestRequest("r2", new AdapterReqConfig("a"));
        m.ingestRequest("base", null);
        AdapterStep prefill = step(row("r1", 3), row("base", 2), row("r2", 1));
        m.admit(prefill, ctx("r1", "base", "r2"));
        AdapterPlan plan = m.plan(prefill, ctx("r1", "base", "r2"));
        assertThat(plan.active()).isTrue();
        assertThat(cpu.toInts(plan.slotIds())).containsExactly(0, 0, 0, -1, -1, 1);

        StepContext padded = ctx("r2");
        padded.setPaddedRequestIds(List.of("r2", "-1"));
        assertThat(cpu.toInts(m.plan(step(row("r2", 1), row("-1", 1)), padded).slotIds())).containsExactly(1, -1);

        assertThat(m.plan(step(row("base", 4)), ctx("base")).active()).as("no adapter row: nothing planned").isFalse();
    }
}
