package org.mstar.flink.frame;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.frame.FrameEngine;
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
    private static final FrameModelConfig CONFIG = new FrameModelConfig(32, 16, 2, 1, 8, 32, 128, 3, 1e-5, 10000,
            List.of(new RingKVLayerConfig(2, 2, 1)));

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

    private static KeyedOneInputStreamOperatorTestHarness<String, FrameRequest, FrameResponse> harness() throws Exception {
        FrameEngineFactory engines = (device, subtask) ->
                FrameEngine.owning(FrameModel.random(CONFIG, new CpuDevice(1), DType.F32, 5), 1);
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(new FrameSessionOperatorFactory(engines, "cpu"),
                FrameRequest::getSessionId, Types.STRING, 128, 1, 0);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend());
        return harness;
    }

    private static FrameRequest open(String id, int action) {
        List<Integer> tokens = new ArrayList<>();
        for (int i = 0; i < CONFIG.tokensPerFrame(); i++) tokens.add((i * 7 + action) % CONFIG.vocabSize());
        return FrameRequest.newBuilder().setSessionId(id).setKind(FrameRequestKind.OPEN).setTokens(tokens)
                .setAction(action).build();
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
