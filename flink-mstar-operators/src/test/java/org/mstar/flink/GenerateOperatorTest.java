package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.state.KeyedStateStore;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.RequestMirror;
import org.mstar.schemas.Response;

/** Drives one {@link GenerateOperator} on RocksDB keyed state with a {@link FakeEngine}, step by step. */
class GenerateOperatorTest {
    private static final int MAX_PARALLELISM = 128;

    @Test
    void streamsEveryTokenInOrderThenOneResultAndClearsState() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("a", 5);
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            runToIdle(harness);

            collect(harness).assertComplete(requests);
            harness.prepareSnapshotPreBarrier(1);
            assertThat(mirrors(harness)).isZero();
        }
    }

    @Test
    void restoreMidGenerationContinuesIdentically() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("b", 6);
        TestRequests.Collected committed = new TestRequests.Collected();
        OperatorSubtaskState snapshot;
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            runSteps(harness, 5);
            harness.prepareSnapshotPreBarrier(1);
            snapshot = harness.snapshot(1, 1);
            committed.addAll(harness.extractOutputValues());
            assertThat(mirrors(harness)).isEqualTo(requests.size());
            // Output after the checkpoint is lost with the failure (its transaction is aborted).
            runSteps(harness, 3);
        }
        try (var restored = harness(new Configuration(), 1, 0)) {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            runToIdle(restored);
            committed.addAll(restored.extractOutputValues());
        }
        committed.assertComplete(requests);
    }

    @Test
    void aCheckpointSavesOnlyTheTokensGeneratedSinceThePreviousOneAndARestoreJoinsThem() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("g", 2); // both run from the first step
        requests.forEach(r -> {
            r.setIgnoreEos(true);
            r.setMaxTokens(20);
        });
        TestRequests.Collected committed = new TestRequests.Collected();
        OperatorSubtaskState snapshot;
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            runSteps(harness, 4);
            harness.prepareSnapshotPreBarrier(1);
            harness.snapshot(1, 1);
            runSteps(harness, 3);
            harness.prepareSnapshotPreBarrier(2);
            harness.prepareSnapshotPreBarrier(3); // nothing new: nothing appended
            runSteps(harness, 5);
            harness.prepareSnapshotPreBarrier(4);
            snapshot = harness.snapshot(4, 4);
            committed.addAll(harness.extractOutputValues());

            for (GenerateRequest r : requests) {
                harness.getOperator().setCurrentKey(r.getRequestId());
                KeyedStateStore store = harness.getOperator().getKeyedStateStore();
                RequestMirror mirror = store.getState(new ValueStateDescriptor<>(GenerateOperator.MIRROR_STATE,
                        new AvroTypeInfo<>(RequestMirror.class))).value();
                int first = mirror.getGeneratedTokenIds().size();
                assertThat(first).as("tokens in the mirror written at the first checkpoint").isPositive();
                List<Integer> chunkSizes = new ArrayList<>();
                store.getListState(new ListStateDescriptor<>(GenerateOperator.MIRROR_STATE + RequestMirrors.TOKENS_SUFFIX,
                        PrimitiveArrayTypeInfo.INT_PRIMITIVE_ARRAY_TYPE_INFO)).get().forEach(c -> chunkSizes.add(c.length));
                assertThat(chunkSizes).as("chunks appended after the mirror").hasSize(2);
                assertThat(first + chunkSizes.get(0) + chunkSizes.get(1))
                        .isEqualTo(committed.tokens.get(r.getRequestId()).size());
            }
            runSteps(harness, 3); // lost with the failure
        }
        try (var restored = harness(new Configuration(), 1, 0)) {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            runToIdle(restored);
            committed.addAll(restored.extractOutputValues());
            assertThat(mirrors(restored)).isZero();
        }
        committed.assertComplete(requests);
    }

    @Test
    void aRequestIdReusedAfterItsRequestCompletedGets409AlsoAfterARestore() throws Exception {
        GenerateRequest first = TestRequests.request("reused", 4);
        GenerateRequest other = TestRequests.request("fresh", 5);
        OperatorSubtaskState snapshot;
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            harness.processElement(first, 0);
            runToIdle(harness);
            collect(harness).assertComplete(List.of(first));
            harness.getOutput().clear();

            harness.processElement(GenerateRequest.newBuilder(first).setPrompt("another prompt").build(), 0);
            harness.processElement(other, 0);
            runToIdle(harness);
            TestRequests.Collected out = collect(harness);
            out.assertComplete(List.of(other));
            assertThat(out.tokens).doesNotContainKey("reused");
            assertThat(out.errors).singleElement().satisfies(e -> {
                assertThat(e.getRequestId()).isEqualTo("reused");
                assertThat(e.getCode()).isEqualTo(Responses.CONFLICT);
                assertThat(e.getMessage()).contains("'reused' was already taken", "new id",
                        GenerateOptions.REQUEST_ID_RETENTION.key());
            });
            harness.prepareSnapshotPreBarrier(1);
            snapshot = harness.snapshot(1, 1);
        }
        try (var restored = harness(new Configuration(), 1, 0)) {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            restored.processElement(first, 0);
            runToIdle(restored);
            assertThat(collect(restored).errors).extracting(ErrorEvent::getCode).containsExactly(Responses.CONFLICT);
        }
    }

    @Test
    void withoutRetentionAReusedIdIsServedAgain() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.REQUEST_ID_RETENTION, Duration.ZERO);
        GenerateRequest request = TestRequests.request("again", 4);
        try (var harness = harness(conf, 1, 0)) {
            EngineHarness.open(harness);
            harness.processElement(request, 0);
            runToIdle(harness);
            harness.getOutput().clear();
            harness.processElement(request, 0);
            runToIdle(harness);
            TestRequests.Collected out = collect(harness);
            out.assertComplete(List.of(request));
            assertThat(out.errors).isEmpty();
        }
    }

    @Test
    void noStepIsScheduledWhileNothingIsLive() throws Exception {
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            assertThat(harness.getProcessingTimeService().getNumActiveTimers()).as("after open").isZero();
            harness.processElement(TestRequests.request("t", 1), 0);
            assertThat(harness.getProcessingTimeService().getNumActiveTimers()).as("with a request").isEqualTo(1);
            runToIdle(harness);
            harness.setProcessingTime(harness.getProcessingTime() + 60_000);
            assertThat(harness.getProcessingTimeService().getNumActiveTimers()).as("after it finished").isZero();
            assertThat(collect(harness).results).containsOnlyKeys("t");
        }
    }

    @Test
    void restoreUnderAnotherModelEndsLiveRequestsWith500InsteadOfResuming(@TempDir Path tmp) throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("m", 4);
        Configuration before = modelConf(tmp.resolve("model-a"), "weights A");
        Configuration after = modelConf(tmp.resolve("model-b"), "weights B");
        OperatorSubtaskState snapshot;
        try (var harness = harness(before, 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            runSteps(harness, 3);
            harness.prepareSnapshotPreBarrier(1);
            snapshot = harness.snapshot(1, 1);
        }
        try (var restored = harness(after, 1, 0)) {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            runToIdle(restored);
            TestRequests.Collected out = collect(restored);
            assertThat(out.tokens).isEmpty();
            assertThat(out.errors).extracting(ErrorEvent::getRequestId, ErrorEvent::getCode)
                    .containsExactlyInAnyOrderElementsOf(requests.stream()
                            .map(r -> tuple(r.getRequestId(), Responses.SERVER_ERROR)).toList());
            assertThat(out.errors.get(0).getMessage()).contains("not resumed", "model");
            assertThat(mirrors(restored)).isZero();
        }
        try (var sameModel = harness(before, 1, 0)) {
            sameModel.initializeState(snapshot);
            EngineHarness.open(sameModel);
            assertThat(((GenerateOperator) sameModel.getOperator()).liveRequests()).isEqualTo(requests.size());
        }
    }

    private static Configuration modelConf(Path dir, String weights) throws Exception {
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("config.json"), "{}");
        Files.writeString(dir.resolve("model.safetensors"), weights);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, dir.toString());
        return conf;
    }

    @Test
    void restoreAtHigherParallelismSplitsLiveRequests() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("c", 12);
        TestRequests.Collected committed = new TestRequests.Collected();
        OperatorSubtaskState snapshot;
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            runSteps(harness, 4);
            harness.prepareSnapshotPreBarrier(1);
            snapshot = harness.snapshot(1, 1);
            committed.addAll(harness.extractOutputValues());
        }
        int resumedTotal = 0;
        for (int subtask = 0; subtask < 2; subtask++) {
            try (var restored = harness(new Configuration(), 2, subtask)) {
                restored.initializeState(AbstractStreamOperatorTestHarness.repartitionOperatorState(
                        snapshot, MAX_PARALLELISM, 1, 2, subtask));
                EngineHarness.open(restored);
                int resumed = ((GenerateOperator) restored.getOperator()).liveRequests();
                assertThat(resumed).as("requests resumed by subtask %s", subtask).isPositive();
                resumedTotal += resumed;
                runToIdle(restored);
                committed.addAll(restored.extractOutputValues());
            }
        }
        assertThat(resumedTotal).isEqualTo(requests.size());
        committed.assertComplete(requests);
    }

    @Test
    void invalidRequestsGet400AndOthersComplete() throws Exception {
        GenerateRequest negative = TestRequests.request("bad-temp", 1);
        negative.setTemperature(-1.0);
        GenerateRequest tooLong = TestRequests.request("bad-long", 2);
        tooLong.setPrompt("word ".repeat(FakeEngineFactory.CONTEXT_LENGTH));
        List<GenerateRequest> good = TestRequests.requests("ok", 2);
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            harness.processElement(good.get(0), 0);
            harness.processElement(negative, 0);
            harness.processElement(tooLong, 0);
            harness.processElement(good.get(1), 0);
            runToIdle(harness);

            TestRequests.Collected out = collect(harness);
            out.assertComplete(good);
            assertThat(out.errors).extracting(ErrorEvent::getRequestId, ErrorEvent::getCode)
                    .containsExactly(tuple("bad-temp", 400),
                            tuple("bad-long", 400));
            assertThat(out.errors.get(0).getMessage()).startsWith("temperature:");
            assertThat(out.errors.get(1).getMessage()).startsWith("prompt:").contains("context");
        }
    }

    @Test
    void duplicateOfLiveRequestIsIgnored() throws Exception {
        GenerateRequest request = TestRequests.request("dup", 4);
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            harness.processElement(request, 0);
            runSteps(harness, 1);
            harness.processElement(GenerateRequest.newBuilder(request).build(), 0);
            runToIdle(harness);
            collect(harness).assertComplete(List.of(request));
        }
    }

    @Test
    void fullWaitingQueueStepsInsideProcessElement() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MAX_WAITING, 2);
        List<GenerateRequest> requests = TestRequests.requests("bp", 8);
        try (var harness = harness(conf, 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            // No timer fired, yet the engine stepped to make room: tokens are out.
            assertThat(collect(harness).tokens).isNotEmpty();
            runToIdle(harness);
            collect(harness).assertComplete(requests);
        }
    }

    @Test
    void unsetMaxWaitingTakesTheEnginesRowsAndAtLeast64BeforeItSteps() throws Exception {
        for (int rows : new int[] {2, 100}) {
            int taken = Math.max(64, rows);
            List<GenerateRequest> requests = TestRequests.requests("w" + rows, taken + 1);
            try (var harness = harness(new Configuration(), rows)) {
                EngineHarness.open(harness);
                for (GenerateRequest r : requests.subList(0, taken)) {
                    harness.processElement(r, 0);
                }
                assertThat(collect(harness).tokens).as(rows + " rows: no step yet").isEmpty();
                harness.processElement(requests.get(taken), 0);
                assertThat(collect(harness).tokens).as(rows + " rows: stepped to make room").isNotEmpty();
                runToIdle(harness);
                collect(harness).assertComplete(requests);
            }
        }
    }

    @Test
    void requestWithoutTokenPastQueueTimeoutGets429() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.QUEUE_TIMEOUT, Duration.ofSeconds(1));
        // The engine runs 2 requests at a time in these tests: the third waits.
        List<GenerateRequest> requests = TestRequests.requests("q", 3);
        requests.forEach(r -> r.setIgnoreEos(true));
        try (var harness = harness(conf, 1, 0)) {
            EngineHarness.open(harness);
            harness.setProcessingTime(1_000);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            // the first step, once the arrival window has passed, starts two
            runSteps(harness, 1 + (int) GenerateOperator.ARRIVAL_WINDOW_MILLIS);
            harness.setProcessingTime(2_500);
            runToIdle(harness);

            TestRequests.Collected out = collect(harness);
            out.assertComplete(requests.subList(0, 2));
            assertThat(out.errors).singleElement().satisfies(e -> {
                assertThat(e.getRequestId()).isEqualTo("q-2");
                assertThat(e.getCode()).isEqualTo(429);
            });
            assertThat(out.tokens).doesNotContainKey("q-2");
        }
    }

    @Test
    void stepsRunBackToBackUnlessRequestsArrivedBeforeTheStep() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("w", 2);
        requests.forEach(r -> {
            r.setIgnoreEos(true);
            r.setMaxTokens(30);
        });
        long window = GenerateOperator.ARRIVAL_WINDOW_MILLIS;
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            harness.setProcessingTime(100);
            harness.processElement(requests.get(0), 0);
            assertThat(nextStep(harness)).isEqualTo(100);

            // the step due at 100 runs at 110, and a request arrived before it: the next leaves an arrival window
            harness.setProcessingTime(110);
            assertThat(nextStep(harness)).isEqualTo(110 + window);

            // nothing arrived before this step: the next is due 1 ms after this one was
            harness.setProcessingTime(110 + window);
            assertThat(nextStep(harness)).isEqualTo(110 + window + 1);

            harness.processElement(requests.get(1), 0);
            harness.setProcessingTime(120);
            assertThat(nextStep(harness)).isEqualTo(120 + window);

            runToIdle(harness);
            collect(harness).assertComplete(requests);
        }
    }

    @Test
    void aBurstHoldsTheDueStepWhileItsRequestsArriveForAtMostTheBurstWindow() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("b", 30);
        long window = GenerateOperator.ARRIVAL_WINDOW_MILLIS;
        int burst = (int) GenerateOperator.BURST_WINDOW_MILLIS;
        try (var harness = harness(new Configuration(), 2 + burst)) {
            EngineHarness.open(harness);
            harness.setProcessingTime(100);
            harness.processElement(requests.get(0), 0);
            harness.processElement(requests.get(1), 0);
            // due, but the latest request arrived within the arrival window: held back a millisecond at a time
            for (long t = 100; t <= 100 + window; t++) {
                harness.setProcessingTime(t);
                assertThat(nextStep(harness)).isEqualTo(t + 1);
                assertThat(collect(harness).tokens).isEmpty();
            }
            // nothing arrived since: the step takes both requests in one prefill
            harness.setProcessingTime(100 + window + 1);
            assertThat(collect(harness).tokens).containsOnlyKeys("b-0", "b-1");

            // a request every millisecond holds the next step back until the burst window has passed
            harness.setProcessingTime(200);
            for (int i = 0; i < burst; i++) {
                harness.setProcessingTime(200 + i);
                harness.processElement(requests.get(2 + i), 0);
                assertThat(collect(harness).tokens).doesNotContainKey("b-2");
            }
            harness.setProcessingTime(200 + burst);
            assertThat(collect(harness).tokens).containsKeys("b-2", "b-" + (1 + burst));

            runToIdle(harness);
            collect(harness).assertComplete(requests.subList(0, 2 + burst));
        }
    }

    private static long nextStep(AbstractStreamOperatorTestHarness<?> harness) {
        assertThat(harness.getProcessingTimeService().getActiveTimerTimestamps()).hasSize(1);
        return harness.getProcessingTimeService().getActiveTimerTimestamps().iterator().next();
    }

    @Test
    void finishDrainsEveryRequest() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("f", 4);
        try (var harness = harness(new Configuration(), 1, 0)) {
            EngineHarness.open(harness);
            for (GenerateRequest r : requests) {
                harness.processElement(r, 0);
            }
            harness.getOperator().finish();
            collect(harness).assertComplete(requests);
        }
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness(
            Configuration conf, int parallelism, int subtask) throws Exception {
        return harness(conf, parallelism, subtask, 2);
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness(
            Configuration conf, int rows) throws Exception {
        return harness(conf, 1, 0, rows);
    }

    /** @param rows requests the fake engine runs at once */
    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness(
            Configuration conf, int parallelism, int subtask, int rows) throws Exception {
        var factory = new GenerateOperatorFactory(
                new FakeEngineFactory(rows, Duration.ZERO), GenerateSettings.from(conf));
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(
                factory, GenerateRequest::getRequestId, Types.STRING, MAX_PARALLELISM, parallelism, subtask);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend());
        return harness;
    }

    /** Keys with a request mirror in this subtask's keyed state. */
    private static long mirrors(AbstractStreamOperatorTestHarness<Response> harness) throws Exception {
        try (var keys = harness.getOperator().getKeyedStateBackend()
                .getKeys(GenerateOperator.MIRROR_STATE, VoidNamespace.INSTANCE)) {
            return keys.count();
        }
    }

    /** Advances processing time 1 ms at a time, {@code count} times: each fires the pending step timer. */
    private static void runSteps(AbstractStreamOperatorTestHarness<?> harness, int count) throws Exception {
        for (int i = 0; i < count; i++) {
            harness.setProcessingTime(harness.getProcessingTime() + 1);
        }
    }

    /** Advances processing time until no step is pending: every request is done. */
    private static void runToIdle(AbstractStreamOperatorTestHarness<?> harness) throws Exception {
        while (harness.getProcessingTimeService().getNumActiveTimers() > 0) {
            runSteps(harness, 1);
        }
    }

    private static TestRequests.Collected collect(AbstractStreamOperatorTestHarness<Response> harness) {
        TestRequests.Collected out = new TestRequests.Collected();
        out.addAll(new ArrayList<>(harness.extractOutputValues()));
        return out;
    }
}
