package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.engine.EngineRole;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.PrefillHandoff;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.Response;

/**
 * One {@link DecodeOperator} on RocksDB keyed state with a decode engine on a small random Llama: it applies a
 * hand-off once all its records are in, whatever their order, once, and across a snapshot taken mid hand-off.
 */
class DecodeOperatorTest {
    private static final int MAX_PARALLELISM = 128;
    static Path model;

    @BeforeAll
    static void writeModel() throws Exception {
        model = Files.createTempDirectory("decode-operator-test");
        CheckpointWriter.writeRandom(ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(32).intermediateSize(64).numLayers(2).numHeads(4).numKvHeads(2).headDim(8)
                .ropeTheta(10_000).maxPositionEmbeddings(256).vocabSize(300).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).build(), DType.F32, 5, model);
    }

    @AfterAll
    static void deleteModel() throws Exception {
        org.apache.commons.io.FileUtils.deleteDirectory(model.toFile());
    }

    private static LlamaEngineFactory engines(EngineRole role) {
        return engines(role, new Configuration());
    }

    private static LlamaEngineFactory engines(EngineRole role, Configuration c) {
        c.set(GenerateOptions.MODEL_DIR, model.toString());
        c.set(LlamaEngineOptions.PAGE_SIZE, 4);
        c.set(LlamaEngineOptions.MAX_SEQ_LEN, 128);
        c.set(DisaggregationOptions.ENGINE_ROLE, role);
        return new LlamaEngineFactory(c);
    }

    private static GenerateRequest request(String id, int promptLength) {
        List<Integer> ids = new ArrayList<>();
        for (int i = 0; i < promptLength; i++) {
            ids.add(2 + (i * 7 + id.length()) % 290);
        }
        return GenerateRequest.newBuilder().setRequestId(id).setPromptTokenIds(ids).setMaxTokens(6)
                .setTemperature(0.7).setSeed(11L).setIgnoreEos(true).build();
    }

    /** The colocated engine's tokens, and the prefill engine's hand-off as records of at most 600 bytes. */
    private static List<KvHandoff> prefill(GenerateRequest r, List<Integer> expected) throws Exception {
        RequestConverter converter = GenerateSettings.from(new Configuration()).converter();
        try (GenerationEngine colocated = engines(EngineRole.COLOCATED).create("cpu", 0)) {
            expected.addAll(TestRequests.reference(List.of(r), colocated).get(r.getRequestId()));
        }
        try (GenerationEngine prefill = engines(EngineRole.PREFILL).create("cpu", 0)) {
            prefill.submit(converter.convert(r));
            PrefillHandoff h = prefill.step().handoffs().get(0);
            return HandoffRecords.split(h, r, 600, System.currentTimeMillis());
        }
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, KvHandoff, Response> harness() throws Exception {
        return harness(new Configuration());
    }

    /** @param conf the operator's settings and its engine's knobs */
    private static KeyedOneInputStreamOperatorTestHarness<String, KvHandoff, Response> harness(Configuration conf)
            throws Exception {
        var factory = new DecodeOperatorFactory(engines(EngineRole.DECODE, new Configuration(conf)),
                GenerateSettings.from(conf));
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(
                factory, KvHandoff::getRequestId, Types.STRING, MAX_PARALLELISM, 1, 0);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend());
        return harness;
    }

    @Test
    void recordsInAnyOrderRepeatedOrResentAreAppliedOnce() throws Exception {
        GenerateRequest r = request("a", 13);
        List<Integer> expected = new ArrayList<>();
        List<KvHandoff> records = prefill(r, expected);
        assertThat(records.size()).as("records of the hand-off").isGreaterThan(2);
        List<KvHandoff> shuffled = new ArrayList<>(records);
        Collections.reverse(shuffled);
        try (var harness = harness()) {
            EngineHarness.open(harness);
            harness.processElement(shuffled.get(0), 0);
            harness.processElement(shuffled.get(0), 0); // a repeat of a part not yet applied overwrites it
            for (KvHandoff k : shuffled.subList(1, shuffled.size())) {
                harness.processElement(k, 0);
            }
            for (KvHandoff k : records) { // the whole hand-off again, while the request is live
                harness.processElement(k, 0);
            }
            runToIdle(harness);
            assertDecoded(collect(harness), r, expected);
        }
    }

    @Test
    void aSnapshotMidHandoffKeepsTheRecordsUntilTheRestArrive() throws Exception {
        GenerateRequest r = request("b", 17);
        List<Integer> expected = new ArrayList<>();
        List<KvHandoff> records = prefill(r, expected);
        OperatorSubtaskState snapshot;
        try (var harness = harness()) {
            EngineHarness.open(harness);
            harness.processElement(records.get(0), 0);
            harness.processElement(records.get(1), 0);
            assertThat(keysWithParts(harness)).as("parts stay on the heap between barriers").isZero();
            harness.prepareSnapshotPreBarrier(1);
            assertThat(keysWithParts(harness)).as("a barrier that finds the hand-off incomplete").isOne();
            snapshot = harness.snapshot(1, 1);
            assertThat(harness.extractOutputValues()).isEmpty();
        }
        try (var restored = harness()) {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            for (KvHandoff k : records.subList(2, records.size())) {
                restored.processElement(k, 0);
            }
            assertThat(keysWithParts(restored)).as("cleared once complete").isZero();
            runToIdle(restored);
            assertDecoded(collect(restored), r, expected);
        }
    }

    @Test
    void aBrokenHandoffIsA500AndTheOperatorServesOn() throws Exception {
        GenerateRequest r = request("c", 9);
        List<Integer> expected = new ArrayList<>();
        List<KvHandoff> records = prefill(r, expected);
        KvHandoff last = records.get(records.size() - 1);
        try (var harness = harness()) {
            EngineHarness.open(harness);
            for (KvHandoff k : records.subList(0, records.size() - 1)) {
                KvHandoff renamed = KvHandoff.newBuilder(k).setRequestId("broken").build();
                harness.processElement(renamed, 0);
            }
            harness.processElement(new KvHandoff("broken", last.getPart(), last.getParts(), null,
                    ByteBuffer.wrap(new byte[3])), 0);
            records.forEach(k -> processUnchecked(harness, k));
            runToIdle(harness);
            TestRequests.Collected out = collect(harness);
            assertThat(out.errors).extracting(ErrorEvent::getRequestId, ErrorEvent::getCode)
                    .containsExactly(org.assertj.core.api.Assertions.tuple("broken", 500));
            assertDecoded(out, r, expected);
        }
    }

    @Test
    void aHandoffWithoutATokenHereWithinTheQueueTimeoutGets429() throws Exception {
        GenerateRequest first = request("first", 9);
        GenerateRequest second = request("second", 11);
        GenerateRequest third = request("third", 13);
        List<Integer> firstTokens = new ArrayList<>();
        List<Integer> thirdTokens = new ArrayList<>();
        List<KvHandoff> firstRecords = prefill(first, firstTokens);
        List<KvHandoff> secondRecords = prefill(second, new ArrayList<>());
        List<KvHandoff> thirdRecords = prefill(third, thirdTokens);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.QUEUE_TIMEOUT, java.time.Duration.ofSeconds(1));
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 1); // the second waits while the first decodes
        try (var harness = harness(conf)) {
            EngineHarness.open(harness);
            harness.setProcessingTime(1_000);
            for (KvHandoff k : firstRecords) {
                harness.processElement(k, 0);
            }
            for (KvHandoff k : secondRecords) {
                harness.processElement(k, 0);
            }
            // part of the third's hand-off: while it is incomplete, steps are spaced out (1 ms in harness time)
            harness.processElement(thirdRecords.get(0), 0);
            harness.setProcessingTime(1_001); // one step: the first's token 1
            harness.setProcessingTime(2_500); // the second has waited 1.5 s without a token from this side
            for (KvHandoff k : thirdRecords.subList(1, thirdRecords.size())) {
                harness.processElement(k, 0); // its clock starts now, complete
            }
            runToIdle(harness);

            TestRequests.Collected out = collect(harness);
            assertDecoded(out, first, firstTokens);
            assertDecoded(out, third, thirdTokens);
            assertThat(out.errors).singleElement().satisfies(e -> {
                assertThat(e.getRequestId()).isEqualTo("second");
                assertThat(e.getCode()).isEqualTo(429);
            });
            assertThat(out.tokens).doesNotContainKey("second");
            assertThat(((DecodeOperator) harness.getOperator()).liveRequests()).isZero();
        }
    }

    @Test
    void whileAHandoffIsPartlyReceivedStepsLeaveTimeForItsRecords() throws Exception {
        GenerateRequest first = request("first", 9);
        GenerateRequest second = request("second", 13);
        List<Integer> firstTokens = new ArrayList<>();
        List<Integer> secondTokens = new ArrayList<>();
        List<KvHandoff> firstRecords = prefill(first, firstTokens);
        List<KvHandoff> secondRecords = prefill(second, secondTokens);
        try (var harness = harness()) {
            EngineHarness.open(harness);
            harness.setProcessingTime(100);
            for (KvHandoff k : firstRecords) {
                harness.processElement(k, 0);
            }
            harness.processElement(secondRecords.get(0), 0);
            harness.setProcessingTime(101);
            // a step took no harness time: the next waits the 1 ms minimum instead of running at once
            assertThat(harness.getProcessingTimeService().getActiveTimerTimestamps()).containsExactly(102L);
            for (KvHandoff k : secondRecords.subList(1, secondRecords.size())) {
                harness.processElement(k, 0);
            }
            harness.setProcessingTime(102);
            // nothing partly received: steps ran back to back at 102 until both requests were done
            assertThat(harness.getProcessingTimeService().getNumActiveTimers()).isZero();
            TestRequests.Collected out = collect(harness);
            assertDecoded(out, first, firstTokens);
            assertDecoded(out, second, secondTokens);
        }
    }

    /** Tokens 1.. of {@code r} (token 0 is the prefill side's) and one result with all of them. */
    private static void assertDecoded(TestRequests.Collected out, GenerateRequest r, List<Integer> expected) {
        String id = r.getRequestId();
        assertThat(out.tokens.get(id)).extracting(t -> t.getIndex()).containsExactly(1, 2, 3, 4, 5);
        assertThat(out.tokens.get(id)).extracting(t -> t.getTokenId()).containsExactlyElementsOf(expected.subList(1, 6));
        assertThat(out.results.get(id)).singleElement()
                .satisfies(result -> assertThat(result.getTokenIds()).isEqualTo(expected));
    }

    private static void processUnchecked(KeyedOneInputStreamOperatorTestHarness<String, KvHandoff, Response> h,
                                         KvHandoff k) {
        try {
            h.processElement(k, 0);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static long keysWithParts(KeyedOneInputStreamOperatorTestHarness<String, KvHandoff, Response> h)
            throws Exception {
        try (var keys = h.getOperator().getKeyedStateBackend()
                .getKeys(DecodeOperator.PARTS_STATE, org.apache.flink.runtime.state.VoidNamespace.INSTANCE)) {
            return keys.distinct().count();
        }
    }

    private static void runToIdle(AbstractStreamOperatorTestHarness<?> harness) throws Exception {
        while (harness.getProcessingTimeService().getNumActiveTimers() > 0) {
            harness.setProcessingTime(harness.getProcessingTime() + 1);
        }
    }

    private static TestRequests.Collected collect(AbstractStreamOperatorTestHarness<Response> harness) {
        TestRequests.Collected out = new TestRequests.Collected();
        out.addAll(new ArrayList<>(harness.extractOutputValues()));
        return out;
    }
}
