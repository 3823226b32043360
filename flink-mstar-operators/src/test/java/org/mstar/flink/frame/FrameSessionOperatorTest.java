package org.mstar.flink.frame;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.SchedulingPolicy;
import org.mstar.engine.frame.FrameEngine;
import org.mstar.engine.frame.SessionRanking;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.FrameEvent;
import org.mstar.schemas.FrameRequest;
import org.mstar.schemas.FrameRequestKind;
import org.mstar.schemas.FrameResponse;

/** Drives one {@link FrameSessionOperator} with one ring on RocksDB keyed state, step by step. */
class FrameSessionOperatorTest {
    /** Two layers reaching 3 and 4 frames back: a replay shorter than 9 inputs would not rebuild them. */
    private static final FrameModelConfig CONFIG = new FrameModelConfig(32, 16, 2, 1, 8, 32, 128, 3, 1e-5, 10000,
            List.of(new RingKVLayerConfig(3, 3, 1), new RingKVLayerConfig(2, 2, 2)));
    /** Wide enough random projections that a frame's prediction depends on the history it attends. */
    private static final double HISTORY_STD = 0.5;
    /** Strict priority: no aging, so a test's ranks do not depend on the wall clock. */
    private static final SessionRanking PRIORITY = new SessionRanking(SchedulingPolicy.PRIORITY, Duration.ZERO);

    @Test
    void aSessionBeyondTheRingsWaitsUntilOneClosesAndAClosedIdStartsOver() throws Exception {
        try (var harness = harness()) {
            harness.open();
            harness.processElement(open("a", 1), 0);
            harness.processElement(open("b", 2), 0);
            harness.processElement(frame("a", 1), 0);
            runToIdle(harness);
            assertThat(frames(harness)).containsExactly("a:1", "a:2"); // b waits for the one ring

            harness.processElement(close("a"), 0);
            harness.processElement(open("a", 1), 0); // the same id again: a new session, behind b
            runToIdle(harness);
            assertThat(frames(harness)).containsExactly("a:1", "a:2", "b:1");

            harness.processElement(close("b"), 0);
            runToIdle(harness);
            List<FrameEvent> events = events(harness);
            assertThat(frames(harness)).containsExactly("a:1", "a:2", "b:1", "a:1");
            // a fresh ring predicts what the first one did from the same frame and action
            assertThat(events.get(3).getTokens()).isEqualTo(events.get(0).getTokens());
            assertThat(errors(harness)).isEmpty();
        }
    }

    @Test
    void recordsASessionCannotTakeGetA400AndItGoesOn() throws Exception {
        try (var harness = harness()) {
            harness.open();
            harness.processElement(frame("x", 1), 0); // never opened
            harness.processElement(open("s", 0), 0);
            harness.processElement(open("s", 0), 0); // twice
            harness.processElement(frame("s", 3), 0); // a gap
            harness.processElement(frame("s", 1), 0);
            runToIdle(harness);

            assertThat(frames(harness)).containsExactly("s:1", "s:2");
            assertThat(errors(harness)).extracting(e -> e.getRequestId() + " " + e.getCode() + " " + e.getMessage())
                    .containsExactly("x 400 kind: session x is not open; its first record must be OPEN",
                            "s 400 kind: session s is open already",
                            "s 400 frame discontinuity for session s: expected frame 1, got 3");
        }
    }

    @Test
    void aRestoreFromASnapshotMidSessionContinuesEverySessionExactly() throws Exception {
        List<String> ids = List.of("a", "b", "c");
        List<List<FrameRequest>> records = new ArrayList<>();
        for (String id : ids) {
            List<FrameRequest> rs = new ArrayList<>();
            rs.add(open(id, id.charAt(0) % CONFIG.numActions()));
            for (int f = 1; f <= 14; f++) rs.add(frame(id, f));
            rs.add(close(id));
            records.add(rs);
        }
        List<FrameResponse> uninterrupted;
        try (var harness = harness(2)) {
            harness.open();
            feed(harness, records, 0, 16);
            runToIdle(harness);
            uninterrupted = List.copyOf(harness.extractOutputValues());
        }
        assertThat(uninterrupted).hasSize(3 * 15);
        for (int served : new int[] {1, 5, 10, 13}) {
            List<FrameResponse> out = new ArrayList<>();
            OperatorSubtaskState snapshot;
            try (var harness = harness(2)) {
                harness.open();
                feed(harness, records, 0, served);
                runToIdle(harness);
                feed(harness, records, served, served + 2); // not yet served when the barrier comes
                harness.prepareSnapshotPreBarrier(1);
                snapshot = harness.snapshot(1, 1);
                out.addAll(harness.extractOutputValues());
            }
            try (var restored = harness(2)) {
                restored.initializeState(snapshot);
                restored.open();
                feed(restored, records, served + 2, 16);
                runToIdle(restored);
                out.addAll(restored.extractOutputValues());
            }
            // per session, the same frames in the same order (sessions interleave differently after a restore)
            for (String id : ids) {
                assertThat(ofSession(out, id)).as("session %s after a snapshot with %d records fed", id, served)
                        .containsExactlyElementsOf(ofSession(uninterrupted, id));
            }
        }
    }

    @Test
    void underPriorityAnOutrankingSessionTakesTheRingAndTheOtherGetsItBackByReplayWithTheSameFrames() throws Exception {
        List<FrameRequest> a = new ArrayList<>();
        a.add(open("a", 1));
        for (int f = 1; f <= 16; f++) a.add(frame("a", f));
        List<FrameEvent> alone;
        try (var harness = harness(1, PRIORITY)) {
            harness.open();
            for (FrameRequest r : a) harness.processElement(r, 0);
            runToIdle(harness);
            alone = events(harness);
        }
        try (var harness = harness(1, PRIORITY)) {
            harness.open();
            for (FrameRequest r : a.subList(0, 13)) harness.processElement(r, 0);
            runToIdle(harness);
            harness.processElement(open("b", 2, 5), 0);
            harness.processElement(frame("b", 1), 0);
            for (FrameRequest r : a.subList(13, 17)) harness.processElement(r, 0);
            runToIdle(harness);
            assertThat(frames(harness).subList(13, 15)).containsExactly("b:1", "b:2"); // a waits without a ring

            harness.processElement(close("b"), 0);
            runToIdle(harness);
            assertThat(frames(harness)).hasSize(19).endsWith("a:14", "a:15", "a:16", "a:17");
            // the ring a got back, rebuilt from its last inputs, predicts what its first ring would have
            assertThat(ofSession(harness.extractOutputValues(), "a")).containsExactlyElementsOf(alone);
            assertThat(errors(harness)).isEmpty();
        }
    }

    @Test
    void aSessionKeepsItsPriorityAcrossARestoreAndALowerOneWaits() throws Exception {
        OperatorSubtaskState snapshot;
        try (var harness = harness(1, PRIORITY)) {
            harness.open();
            harness.processElement(open("a", 1, 5), 0);
            runToIdle(harness);
            harness.prepareSnapshotPreBarrier(1);
            snapshot = harness.snapshot(1, 1);
        }
        try (var restored = harness(1, PRIORITY)) {
            restored.initializeState(snapshot);
            restored.open();
            restored.processElement(frame("a", 1), 0);
            runToIdle(restored);
            restored.processElement(open("b", 2, 1), 0); // outranks priority 0, not a's 5
            restored.processElement(frame("a", 2), 0);
            runToIdle(restored);
            assertThat(frames(restored)).containsExactly("a:2", "a:3");
        }
    }

    /** Records {@code [from, to)} of every session, sessions interleaved. */
    private static void feed(KeyedOneInputStreamOperatorTestHarness<String, FrameRequest, FrameResponse> harness,
                             List<List<FrameRequest>> records, int from, int to) throws Exception {
        for (int i = from; i < to; i++) {
            for (List<FrameRequest> rs : records) if (i < rs.size()) harness.processElement(rs.get(i), 0);
        }
    }

    private static List<FrameEvent> ofSession(List<FrameResponse> out, String id) {
        return out.stream().map(FrameResponse::getEvent).map(FrameEvent.class::cast)
                .filter(f -> f.getSessionId().equals(id)).toList();
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, FrameRequest, FrameResponse> harness() throws Exception {
        return harness(1);
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, FrameRequest, FrameResponse> harness(int rings)
            throws Exception {
        return harness(rings, SessionRanking.FCFS);
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, FrameRequest, FrameResponse> harness(
            int rings, SessionRanking ranking) throws Exception {
        FrameEngineFactory engines = (device, subtask) -> FrameEngine.owning(
                FrameModel.random(CONFIG, new CpuDevice(1), DType.F32, 5, HISTORY_STD), rings, ranking);
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(new FrameSessionOperatorFactory(engines, "cpu"),
                FrameRequest::getSessionId, Types.STRING, 128, 1, 0);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend());
        return harness;
    }

    private static FrameRequest open(String id, int action) {
        return open(id, action, null);
    }

    private static FrameRequest open(String id, int action, Integer priority) {
        List<Integer> tokens = new ArrayList<>();
        for (int i = 0; i < CONFIG.tokensPerFrame(); i++) tokens.add((i * 7 + action) % CONFIG.vocabSize());
        return FrameRequest.newBuilder().setSessionId(id).setKind(FrameRequestKind.OPEN).setTokens(tokens)
                .setAction(action).setPriority(priority).build();
    }

    private static FrameRequest frame(String id, int index) {
        return FrameRequest.newBuilder().setSessionId(id).setKind(FrameRequestKind.FRAME).setFrameIndex(index)
                .setAction(index % CONFIG.numActions()).build();
    }

    private static FrameRequest close(String id) {
        return FrameRequest.newBuilder().setSessionId(id).setKind(FrameRequestKind.CLOSE).build();
    }

    private static void runToIdle(KeyedOneInputStreamOperatorTestHarness<?, ?, ?> harness) throws Exception {
        while (harness.getProcessingTimeService().getNumActiveTimers() > 0) {
            harness.setProcessingTime(harness.getProcessingTime() + 1);
        }
    }

    private static List<FrameEvent> events(KeyedOneInputStreamOperatorTestHarness<?, ?, FrameResponse> harness) {
        return harness.extractOutputValues().stream().map(FrameResponse::getEvent)
                .filter(FrameEvent.class::isInstance).map(FrameEvent.class::cast).toList();
    }

    private static List<String> frames(KeyedOneInputStreamOperatorTestHarness<?, ?, FrameResponse> harness) {
        return events(harness).stream().map(f -> f.getSessionId() + ":" + f.getFrameIndex()).toList();
    }

    private static List<ErrorEvent> errors(KeyedOneInputStreamOperatorTestHarness<?, ?, FrameResponse> harness) {
        return harness.extractOutputValues().stream().map(FrameResponse::getEvent)
                .filter(ErrorEvent.class::isInstance).map(ErrorEvent.class::cast).toList();
    }
}
