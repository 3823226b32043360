package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.BucketKey;
import org.mstar.resources.KVStep;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/** A leased (captured) decode step writes K/V through static per-(bucket, slot, label) address buffers. */
class KVManagerLeasedWritesTest {
    private static final SlotLease BUCKET_4 = new SlotLease(0, new BucketKey(KvHarness.DECODE, 4, 4));

    @Test
    void aPaddedDecodeStepWritesRealRowsToTheirPagesAndPaddingToTheSink() {
        KvHarness h = new KvHarness(32, 4);
        h.kv.ingestRequest("a", null);
        h.kv.ingestRequest("b", null);
        h.extend("main", 10, Map.of("a", 4, "b", 3));
        int free = h.free();

        List<Segment> segs = List.of(new Segment("a", "main", 1), new Segment("b", "main", 1),
                new Segment("-1", "main", 1), new Segment("-2", "main", 1));
        StepContext ctx = new StepContext(List.of("a", "b"), KvHarness.DECODE, 0, false);
        ctx.setPaddedRequestIds(List.of("a", "b", "-1", "-2"));
        ctx.setSlotLease(BUCKET_4);
        KVPlanOutputs out = h.run(KVStep.builder().segments(segs).build(), ctx,
                Map.of(new StreamLabel("a", "main"), new int[] {40}, new StreamLabel("b", "main"), new int[] {41}));

        assertThat(out.get("main").writePages()).endsWith(PageArena.SINK_PAGE, PageArena.SINK_PAGE);
        assertThat(h.free()).as("a's fifth token takes a page, b's fourth fits its page, padding takes none")
                .isEqualTo(free - 1);
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void addressesPastTheStepsTokensAreNeutralisedToTheSinkPage() {
        try (CpuDevice cpu = new CpuDevice(1); LeasedWriteAddresses leased = new LeasedWriteAddresses(cpu)) {
            Tensor[] first = leased.write(BUCKET_4, output(new int[] {5, 6, 7}, new int[] {1, 2, 3}));
            Tensor[] second = leased.write(BUCKET_4, output(new int[] {9}, new int[] {2}));

            assertThat(second[0]).isSameAs(first[0]);
            assertThat(second[1]).isSameAs(first[1]);
            assertThat(cpu.toInts(second[0])).containsExactly(9, PageArena.SINK_PAGE, PageArena.SINK_PAGE,
                    PageArena.SINK_PAGE);
            assertThat(cpu.toInts(second[1])).containsExactly(2, 0, 0, 0);
        }
    }

    private static KVPlanOutput output(int[] pages, int[] offsets) {
        return new KVPlanOutput("main", 4, List.of(), new PagedIndptrs(new int[] {0}, new int[] {0}, new int[0],
                new int[0], new int[0]), pages, offsets);
    }
}
