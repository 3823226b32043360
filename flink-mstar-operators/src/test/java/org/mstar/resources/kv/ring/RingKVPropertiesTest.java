package org.mstar.resources.kv.ring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.KVSpec;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.RingKVStep;
import org.mstar.resources.StepContext;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

class RingKVPropertiesTest {
    private static final int TPF = RingKVConfig.BLOCK;

    @Property(tries = 200)
    void everyFrameAddressesAWholeSlotInsideItsOwnSession(@ForAll @IntRange(min = 1, max = 8) int frames,
                                                          @ForAll @IntRange(min = 1, max = 8) int buckets,
                                                          @ForAll @IntRange(min = 1, max = 4) int dilation,
                                                          @ForAll @IntRange(min = 0, max = 3) int session,
                                                          @ForAll @IntRange(min = 0, max = 100) int framePos) {
        RingGeometry g = new RingGeometry(TPF, frames, Math.min(buckets, frames), dilation);
        int start = g.ringStart(session, framePos);
        assertThat(start).isBetween(g.sessionBase(session), g.tailStart(session) - TPF);
        assertThat((start - g.sessionBase(session)) % TPF).isZero();
        assertThat(g.tailStart(session) + TPF).isEqualTo(g.sessionBase(session + 1));
        // frames between two kept ones go to the later one's slot
        int kept = ((framePos + dilation - 1) / dilation) * dilation;
        assertThat(g.isWriteStep(kept)).isTrue();
        assertThat(g.slot(framePos)).isEqualTo(g.slot(kept));
        // consecutive kept frames use consecutive slots, wrapping after ring_buckets of them
        assertThat(g.slot(kept + dilation)).isEqualTo((g.slot(kept) + 1) % g.ringBuckets());
    }

    /**
     * Against a model that remembers, per slot, the last kept frame written there: a frame sees
     * exactly the slots holding one of the last ring_buckets kept frames before it, minus its own
     * slot when it is kept, plus its tail; and never another session's rows.
     */
    @Property(tries = 50)
    void visibilityMatchesTheKeptFramesOfThisSessionOnly(@ForAll @IntRange(min = 1, max = 5) int frames,
                                                         @ForAll @IntRange(min = 1, max = 5) int buckets,
                                                         @ForAll @IntRange(min = 1, max = 3) int dilation,
                                                         @ForAll @IntRange(min = 1, max = 14) int steps) {
        int b = Math.min(buckets, frames);
        RingKVConfig config = new RingKVConfig(1, 1, 2, null, TPF, List.of(new RingKVLayerConfig(frames, b, dilation)), 2);
        RingKVManager ring = (RingKVManager) new ResourceFactory(StandardBuilders.all()).build(
                new KVSpec("ring", Set.of("n"), config), EngineResourceInfo.singleRank(new CpuDevice(1), DType.F32));
        RingGeometry g = ring.geometry(0);
        ring.ingestRequest("other", null);
        advance(ring, "other", 0);
        ring.ingestRequest("a", null);
        Set<Integer> writtenSlots = new HashSet<>();
        for (int fp = 0; fp < steps; fp++) {
            advance(ring, "a", fp);
            Set<Integer> expectedSlots = new HashSet<>(writtenSlots);
            if (g.isWriteStep(fp)) expectedSlots.remove(g.slot(fp));
            int session = ring.sessionOf("a");
            Set<Integer> seenSlots = new HashSet<>();
            int tailRows = 0;
            for (int row : ring.visibleRows("a", 0, fp)) {
                assertThat(row).isBetween(g.sessionBase(session), g.tailStart(session) + TPF - 1);
                if (row >= g.tailStart(session)) tailRows++;
                else seenSlots.add((row - g.sessionBase(session)) / TPF);
            }
            assertThat(tailRows).isEqualTo(TPF);
            assertThat(seenSlots).isEqualTo(expectedSlots);
            ring.commit(frame("a", fp), new StepContext(List.of("a"), "f", 0, false));
            if (g.isWriteStep(fp)) writtenSlots.add(g.slot(fp));
        }
    }

    private static void advance(RingKVManager ring, String rid, int fp) {
        assertThat(ring.admit(frame(rid, fp), new StepContext(List.of(rid), "f", 0, false))).isEqualTo(AdmitOutcome.OK);
        if (rid.equals("other")) ring.commit(frame(rid, fp), new StepContext(List.of(rid), "f", 0, false));
    }

    private static RingKVStep frame(String rid, int fp) {
        return new RingKVStep(List.of(), List.of(new RingKVStep.Frame(rid, fp)));
    }
}
