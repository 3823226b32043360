package org.mstar.resources.kv.ring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.KVSpec;
import org.mstar.resources.KVStep;
import org.mstar.resources.Resource;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.RingKVStep;
import org.mstar.resources.StepContext;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

class RingKVManagerTest {
    private static final int TPF = RingKVConfig.BLOCK;
    private static final ResourceFactory FACTORY = new ResourceFactory(StandardBuilders.all());
    private final CpuDevice device = new CpuDevice(1);

    /** Layer 0 keeps every frame in 3 slots; layer 1 every second frame in 2 of its 4. */
    private RingKVManager ring(int sessions) {
        RingKVConfig config = new RingKVConfig(2, 2, 4, null, TPF,
                List.of(new RingKVLayerConfig(3, 3, 1), new RingKVLayerConfig(4, 2, 2)), sessions);
        KVSpec spec = new KVSpec("ring", Set.of("frames"), config);
        return (RingKVManager) FACTORY.build(spec, EngineResourceInfo.singleRank(device, DType.F32));
    }

    private static RingKVStep frame(String rid, int fp) {
        return new RingKVStep(List.of(), List.of(new RingKVStep.Frame(rid, fp)));
    }

    private static StepContext ctx(String... rids) {
        return new StepContext(List.of(rids), "frame", 0, false);
    }

    /** Admit, plan and commit one frame; the admit must succeed. */
    private static void step(RingKVManager ring, String rid, int fp) {
        assertThat(ring.admit(frame(rid, fp), ctx(rid))).isEqualTo(AdmitOutcome.OK);
        ring.plan(frame(rid, fp), ctx(rid));
        ring.commit(frame(rid, fp), ctx(rid));
    }

    private static AdmitRuntimeError terminal(AdmitOutcome outcome) {
        assertThat(outcome.ok()).isFalse();
        assertThat(outcome.reason()).isInstanceOf(AdmitRuntimeError.class);
        assertThat(outcome.reason().terminal()).isTrue();
        return (AdmitRuntimeError) outcome.reason();
    }

    @Test
    void theFactoryBuildsOneBufferPerLayerSizedForEverySessionPlusScratch() {
        RingKVManager ring = ring(2);
        assertThat(ring.buffer(0).shape()).containsExactly(3L * 4 * TPF, 2, 2, 4);
        assertThat(ring.buffer(1).shape()).containsExactly(3L * 5 * TPF, 2, 2, 4);
        assertThat(ring.scratchSession()).isEqualTo(2);
        assertThat(ring.freeSessions()).isEqualTo(2);
        ring.postWarmupValidate();
    }

    @Test
    void theBuilderShardsKvHeadsToTheRank() {
        RingKVConfig config = new RingKVConfig(1, 4, 8, 8, TPF, List.of(new RingKVLayerConfig(1, 1, 1)), 1);
        RingKVManager ring = (RingKVManager) FACTORY.build(new KVSpec("ring", Set.of("frames"), config),
                new EngineResourceInfo(device, 2, 1, DType.BF16, false, Map.of()));
        assertThat(ring.buffer(0).shape()).containsExactly(2L * 2 * TPF, 2, 2, 8);
        assertThat(ring.buffer(0).dtype()).isEqualTo(DType.BF16);
    }

    @Test
    void theStandardBuildersBuildARingSpecIntoARingManager() {
        RingKVConfig config = new RingKVConfig(1, 1, 8, null, TPF, List.of(new RingKVLayerConfig(1, 1, 1)), 1);
        Resource built = FACTORY.build(new KVSpec("ring", Set.of("frames"), config),
                EngineResourceInfo.singleRank(device, DType.F32));
        assertThat(built).isInstanceOf(RingKVManager.class);
        built.cleanup();
    }

    @Test
    void aPlainKvStepIsATypeError() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        assertThatThrownBy(() -> ring.admit(new KVStep(), ctx("a"))).hasMessageContaining("RingKVStep");
    }

    @Test
    void ingestClaimsNothingAndTheFirstFrameClaimsTheLowestFreeSession() {
        RingKVManager ring = ring(2);
        ring.ingestRequest("a", null);
        ring.ingestRequest("b", null);
        assertThat(ring.sessionOf("a")).isEqualTo(-1);
        step(ring, "b", 0);
        step(ring, "a", 0);
        assertThat(ring.sessionOf("b")).isZero();
        assertThat(ring.sessionOf("a")).isEqualTo(1);
        ring.removeRequest("b");
        ring.ingestRequest("c", null);
        step(ring, "c", 0);
        assertThat(ring.sessionOf("c")).isZero();
    }

    @Test
    void aSecondIngestDoesNotResetTheClock() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        step(ring, "a", 0);
        ring.ingestRequest("a", null);
        assertThat(ring.lastFrame("a")).isZero();
        assertThat(ring.sessionOf("a")).isZero();
    }

    @Test
    void framesMustFollowTheLastCommittedOneStartingAtZero() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        assertThat(terminal(ring.admit(frame("a", 1), ctx("a"))).requestIds()).containsExactly("a");
        assertThat(ring.sessionOf("a")).as("refused before any claim").isEqualTo(-1);
        step(ring, "a", 0);
        step(ring, "a", 1);
        assertThat(terminal(ring.admit(frame("a", 1), ctx("a"))).message()).contains("discontinuity");
        assertThat(terminal(ring.admit(frame("a", 3), ctx("a"))).message()).contains("expected frame 2");
        step(ring, "a", 2);
        assertThat(ring.lastFrame("a")).isEqualTo(2);
    }

    @Test
    void aFullRingRefusesANewSessionTerminallyAndClaimsNothing() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        ring.ingestRequest("b", null);
        step(ring, "a", 0);
        AdmitRuntimeError err = terminal(ring.admit(frame("b", 0), ctx("b")));
        assertThat(err.message()).contains("no free ring session");
        assertThat(ring.sessionOf("b")).isEqualTo(-1);
        ring.removeRequest("a");
        step(ring, "b", 0);
        assertThat(ring.sessionOf("b")).isZero();
    }

    @Test
    void otherTerminalRefusals() {
        RingKVManager ring = ring(2);
        ring.ingestRequest("a", null);
        ring.ingestRequest("b", null);
        RingKVStep both = new RingKVStep(List.of(), List.of(new RingKVStep.Frame("a", 0), new RingKVStep.Frame("b", 0)));
        assertThat(terminal(ring.admit(both, ctx("a", "b"))).message()).contains("one session");
        assertThat(terminal(ring.admit(frame("x", 0), ctx("x"))).message()).contains("never ingested");
        assertThat(terminal(ring.admit(frame("b", 0), ctx("a"))).message()).contains("no frame");
        assertThat(ring.freeSessions()).isEqualTo(2);
    }

    @Test
    void rollbackReturnsOnlyTheSessionThatAdmitFreshlyClaimed() {
        RingKVManager ring = ring(2);
        ring.ingestRequest("a", null);
        assertThat(ring.admit(frame("a", 0), ctx("a")).ok()).isTrue();
        ring.rollbackAdmit(frame("a", 0), ctx("a"));
        assertThat(ring.sessionOf("a")).isEqualTo(-1);
        step(ring, "a", 0);
        assertThat(ring.admit(frame("a", 1), ctx("a")).ok()).isTrue();
        ring.rollbackAdmit(frame("a", 1), ctx("a"));
        assertThat(ring.sessionOf("a")).as("an older claim stays").isZero();
        assertThat(ring.lastFrame("a")).isZero();
    }

    @Test
    void paddingRowsParkOnTheScratchSession() {
        RingKVManager ring = ring(2);
        ring.ingestRequest("a", null);
        ring.admit(frame("a", 0), ctx("a"));
        StepContext padded = ctx("a");
        padded.setPaddedRequestIds(List.of("a", "-1", "-2"));
        RingKVPlan plan = (RingKVPlan) ring.plan(frame("a", 0), padded);
        assertThat(plan.sessions()).containsExactly(0, 2, 2);
        assertThat(plan.framePositions()).containsExactly(0, -1, -1);
        assertThat(device.toInts(plan.stepSession())).containsExactly(0);
        ring.ingestCaptureRow("-3");
        StepContext dummies = ctx("-3");
        dummies.setPaddedRequestIds(List.of("-3", "-4"));
        RingKVPlan parked = (RingKVPlan) ring.plan(frame("-3", 0), dummies);
        assertThat(parked.sessions()).containsExactly(2, 2);
        assertThat(parked.stepSession()).as("filled in place").isSameAs(plan.stepSession());
        assertThat(device.toInts(parked.stepSession())).containsExactly(2);
    }

    @Test
    void visibilityIsThisSessionsWrittenRowsMinusTheSlotAboutToBeOverwritten() {
        RingKVManager ring = ring(2);
        ring.ingestRequest("a", null);
        ring.ingestRequest("b", null);
        RingGeometry g0 = ring.geometry(0);
        step(ring, "b", 0);
        ring.admit(frame("a", 0), ctx("a"));
        // frame 0, nothing committed: the tail only
        assertThat(ring.visibleRows("a", 0, 0)).containsExactly(rows(g0.tailStart(1), TPF));
        ring.commit(frame("a", 0), ctx("a"));
        // frame 1 writes slot 1: slot 0 (frame 0) and the tail
        assertThat(ring.visibleRows("a", 0, 1)).containsExactly(concat(rows(g0.ringStart(1, 0), TPF), rows(g0.tailStart(1), TPF)));
        step(ring, "a", 1);
        step(ring, "a", 2);
        // frame 3 wraps onto slot 0: frames 1 and 2 stay visible, frame 0's slot is about to go
        assertThat(ring.visibleRows("a", 0, 3)).containsExactly(concat(rows(g0.ringStart(1, 1), 2 * TPF), rows(g0.tailStart(1), TPF)));
        // b's rows never show in a's view
        int bEnd = g0.sessionBase(1);
        assertThat(IntStream.of(ring.visibleRows("a", 0, 3)).min().getAsInt()).isGreaterThanOrEqualTo(bEnd);
    }

    @Test
    void aDilatedLayerKeepsOnlyEveryDthFrame() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        RingGeometry g1 = ring.geometry(1);
        step(ring, "a", 0); // write step at d=2: bucket 0
        step(ring, "a", 1); // bucket 1, tail only
        // frame 2 is a write step into bucket 1 (slot 1): frame 0's slot stays visible
        assertThat(ring.visibleRows("a", 1, 2)).containsExactly(concat(rows(g1.ringStart(0, 0), TPF), rows(g1.tailStart(0), TPF)));
        step(ring, "a", 2);
        // frame 3 (not a write step) sees both kept frames, nothing is about to be overwritten
        assertThat(ring.visibleRows("a", 1, 3)).containsExactly(concat(rows(g1.ringStart(0, 0), 2 * TPF), rows(g1.tailStart(0), TPF)));
        // frame 4 (bucket 2, slot 0) is about to overwrite frame 0's slot
        step(ring, "a", 3);
        assertThat(ring.visibleRows("a", 1, 4)).containsExactly(concat(rows(g1.ringStart(0, 2), TPF), rows(g1.tailStart(0), TPF)));
    }

    @Test
    void commitKeepsTheTailInTheFramesSlotOnlyOnWriteSteps() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        for (int fp = 0; fp < 4; fp++) {
            ring.admit(frame("a", fp), ctx("a"));
            ring.plan(frame("a", fp), ctx("a"));
            for (int layer = 0; layer < 2; layer++) {
                ring.writeFrame(layer, 0, device.fromFloats(constant(TPF * 2 * 2 * 4, fp + 1), DType.F32, TPF, 2, 2, 4));
            }
            ring.commit(frame("a", fp), ctx("a"));
        }
        RingGeometry g0 = ring.geometry(0);
        RingGeometry g1 = ring.geometry(1);
        // layer 0 keeps every frame in 3 slots: frame 3 replaced frame 0
        assertThat(slotValues(ring, 0, g0.ringStart(0, 3))).containsOnly(4f);
        assertThat(slotValues(ring, 0, g0.ringStart(0, 1))).containsOnly(2f);
        assertThat(slotValues(ring, 0, g0.ringStart(0, 2))).containsOnly(3f);
        // layer 1 keeps frames 0 and 2 only; frame 3 lives in the tail
        assertThat(slotValues(ring, 1, g1.ringStart(0, 0))).containsOnly(1f);
        assertThat(slotValues(ring, 1, g1.ringStart(0, 2))).containsOnly(3f);
        assertThat(slotValues(ring, 1, g1.tailStart(0))).containsOnly(4f);
        assertThatThrownBy(() -> ring.writeFrame(0, 0, device.zeros(DType.F32, TPF, 2, 2, 2))).hasMessageContaining("K/V");
    }

    private float[] slotValues(RingKVManager ring, int layer, int start) {
        return device.toFloats(ring.buffer(layer).rows(start, TPF));
    }

    private static float[] constant(int n, float v) {
        float[] out = new float[n];
        java.util.Arrays.fill(out, v);
        return out;
    }

    @Test
    void resetZeroesTheSessionAndHandsItBack() {
        RingKVManager ring = ring(1);
        ring.ingestRequest("a", null);
        step(ring, "a", 0);
        fill(ring.buffer(0).rows(0, 1), 7f);
        ring.resetRequest("a", true);
        assertThat(ring.freeSessions()).isEqualTo(1);
        assertThat(ring.lastFrame("a")).isEqualTo(-1);
        assertThat(device.toFloats(ring.buffer(0))).containsOnly(0f);
        ring.postWarmupValidate();
        step(ring, "a", 0);
        assertThat(ring.visibleRows("a", 0, 1)).hasSize(2 * TPF);
    }

    @Test
    void warmupValidationRefusesAHeldSession() {
        RingKVManager ring = ring(1);
        ring.ingestCaptureRow("-1");
        step(ring, "-1", 0);
        assertThatThrownBy(ring::postWarmupValidate).hasMessageContaining("held");
        ring.resetRequest("-1", true);
        ring.postWarmupValidate();
    }

    @Test
    void aSnapshotRestoresOntoAnotherManagerAndTheClockContinues() {
        RingKVManager source = ring(2);
        source.ingestRequest("x", null);
        step(source, "x", 0);
        source.ingestRequest("a", null);
        for (int fp = 0; fp < 4; fp++) step(source, "a", fp);
        RingGeometry g1 = source.geometry(1);
        fill(source.buffer(1).rows(g1.sessionBase(1) + 5, 1), 3f);
        RingSessionState state = source.getState("a");
        assertThat(state.lastFrame()).isEqualTo(3);

        RingKVManager target = ring(2);
        target.ingestRequest("a", null);
        target.loadState("a", state);
        assertThat(target.sessionOf("a")).isZero();
        assertThat(target.lastFrame("a")).isEqualTo(3);
        for (int layer = 0; layer < 2; layer++) {
            int shift = source.geometry(layer).sessionBase(1);
            int[] expected = IntStream.of(source.visibleRows("a", layer, 4)).map(r -> r - shift).toArray();
            assertThat(target.visibleRows("a", layer, 4)).containsExactly(expected);
        }
        float[] restored = device.toFloats(target.buffer(1).rows(5, 1));
        assertThat(restored).containsOnly(3f);
        assertThat(terminal(target.admit(frame("a", 3), ctx("a"))).message()).contains("expected frame 4");
        step(target, "a", 4);
    }

    @Test
    void loadStateRefusesAMismatchedGeometryAndAFullRing() {
        RingKVManager source = ring(1);
        source.ingestRequest("a", null);
        step(source, "a", 0);
        RingSessionState state = source.getState("a");
        RingKVManager other = (RingKVManager) FACTORY.build(new KVSpec("ring", Set.of("frames"),
                new RingKVConfig(2, 2, 4, null, TPF, List.of(new RingKVLayerConfig(2, 2, 1), new RingKVLayerConfig(4, 2, 2)), 1)),
                EngineResourceInfo.singleRank(device, DType.F32));
        other.ingestRequest("a", null);
        assertThatThrownBy(() -> other.loadState("a", state)).hasMessageContaining("geometry");
        assertThat(other.sessionOf("a")).isEqualTo(-1);
        source.ingestRequest("b", null);
        assertThatThrownBy(() -> source.loadState("b", state)).hasMessageContaining("no free ring session");
    }

    private void fill(Tensor rows, float v) {
        float[] data = new float[Math.toIntExact(rows.numel())];
        java.util.Arrays.fill(data, v);
        ByteBuffer buf = ByteBuffer.allocate(data.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        buf.asFloatBuffer().put(data);
        device.copyFromHost(buf, rows);
    }

    private static int[] rows(int start, int n) {
        return IntStream.range(start, start + n).toArray();
    }

    private static int[] concat(int[] a, int[] b) {
        return IntStream.concat(IntStream.of(a), IntStream.of(b)).toArray();
    }
}
