package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.engine.EngineRole;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/**
 * One {@link PrefillOperator} on RocksDB keyed state with a prefill engine on a small random Llama: token 0 on the
 * main output, the hand-off as bounded records on the side output, and after a restore from a checkpoint taken
 * before the hand-off, the same token and the same bytes again.
 */
class PrefillOperatorTest {
    static Path model;

    @BeforeAll
    static void writeModel() throws Exception {
        model = Files.createTempDirectory("prefill-operator-test");
        CheckpointWriter.writeRandom(ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(32).intermediateSize(64).numLayers(2).numHeads(4).numKvHeads(2).headDim(8)
                .ropeTheta(10_000).maxPositionEmbeddings(256).vocabSize(300).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).build(), DType.F32, 9, model);
    }

    @AfterAll
    static void deleteModel() throws Exception {
        org.apache.commons.io.FileUtils.deleteDirectory(model.toFile());
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness() throws Exception {
        return harness(new Configuration());
    }

    /** @param conf the operator's settings and its engine's knobs */
    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness(Configuration conf)
            throws Exception {
        Configuration c = new Configuration(conf);
        c.set(GenerateOptions.MODEL_DIR, model.toString());
        c.set(LlamaEngineOptions.PAGE_SIZE, 4);
        c.set(LlamaEngineOptions.MAX_SEQ_LEN, 128);
        c.set(DisaggregationOptions.ENGINE_ROLE, EngineRole.PREFILL);
        var factory = new PrefillOperatorFactory(new LlamaEngineFactory(c), GenerateSettings.from(conf),
                500);
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(
                factory, GenerateRequest::getRequestId, Types.STRING, 128, 1, 0);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend());
        return harness;
    }

    private static GenerateRequest request(String id, int promptLength, int maxTokens) {
        List<Integer> ids = new ArrayList<>();
        for (int i = 0; i < promptLength; i++) {
            ids.add(2 + (i * 13 + id.length()) % 290);
        }
        return GenerateRequest.newBuilder().setRequestId(id).setPromptTokenIds(ids).setMaxTokens(maxTokens)
                .setTemperature(0.9).setSeed(3L).setIgnoreEos(true).build();
    }

    private static void runToIdle(KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> h)
            throws Exception {
        while (h.getProcessingTimeService().getNumActiveTimers() > 0) {
            h.setProcessingTime(h.getProcessingTime() + 1);
        }
    }

    private static List<KvHandoff> handoffs(KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> h) {
        ConcurrentLinkedQueue<StreamRecord<KvHandoff>> out = h.getSideOutput(PrefillOperator.HANDOFFS);
        return out == null ? List.of() : out.stream().map(StreamRecord::getValue).toList();
    }

    @Test
    void emitsTokenZeroAndTheHandoffThenForgetsTheRequest() throws Exception {
        try (var h = harness()) {
            EngineHarness.open(h);
            h.processElement(request("a", 11, 5), 0);
            h.processElement(request("one", 6, 1), 0); // ends with its first token: a result, no hand-off
            runToIdle(h);
            TestRequests.Collected out = new TestRequests.Collected();
            out.addAll(h.extractOutputValues());
            assertThat(out.tokens.get("a")).singleElement().extracting(TokenEvent::getIndex).isEqualTo(0);
            assertThat(out.results).containsOnlyKeys("one");
            List<KvHandoff> records = handoffs(h);
            assertThat(records).isNotEmpty().allSatisfy(r -> {
                assertThat(r.getRequestId()).isEqualTo("a");
                assertThat(r.getParts()).isEqualTo(records.size());
                assertThat(HandoffRecords.dataBytes(r)).isBetween(1, 500);
            });
            assertThat(records.get(0).getHeader().getGeneratedTokenIds())
                    .containsExactly(out.tokens.get("a").get(0).getTokenId());
            try (var keys = h.getOperator().getKeyedStateBackend()
                    .getKeys(PrefillOperator.MIRROR_STATE, org.apache.flink.runtime.state.VoidNamespace.INSTANCE)) {
                assertThat(keys.count()).as("mirrors left").isZero();
            }
        }
    }

    @Test
    void aRequestNotHandedOffWithinTheQueueTimeoutGets429() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.QUEUE_TIMEOUT, java.time.Duration.ofSeconds(1));
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 1); // the second waits while the first prefills
        try (var h = harness(conf)) {
            EngineHarness.open(h);
            h.setProcessingTime(1_000);
            h.processElement(request("first", 11, 5), 0);
            h.processElement(request("second", 7, 5), 0);
            // one step, once the arrival window has passed: the first is handed off
            h.setProcessingTime(1_001);
            h.setProcessingTime(1_001 + GenerateOperator.ARRIVAL_WINDOW_MILLIS);
            h.setProcessingTime(2_500);
            runToIdle(h);

            TestRequests.Collected out = new TestRequests.Collected();
            out.addAll(h.extractOutputValues());
            assertThat(out.tokens).containsOnlyKeys("first");
            assertThat(handoffs(h)).isNotEmpty().allSatisfy(r -> assertThat(r.getRequestId()).isEqualTo("first"));
            assertThat(out.errors).singleElement().satisfies(e -> {
                assertThat(e.getRequestId()).isEqualTo("second");
                assertThat(e.getCode()).isEqualTo(429);
            });
            try (var keys = h.getOperator().getKeyedStateBackend()
                    .getKeys(PrefillOperator.MIRROR_STATE, org.apache.flink.runtime.state.VoidNamespace.INSTANCE)) {
                assertThat(keys.count()).as("mirrors left").isZero();
            }
        }
    }

    @Test
    void aStepBeforeWhichRequestsArrivedLeavesAnArrivalWindow() throws Exception {
        Configuration conf = new Configuration();
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 1); // one prefill a step
        long window = GenerateOperator.ARRIVAL_WINDOW_MILLIS;
        try (var h = harness(conf)) {
            EngineHarness.open(h);
            h.setProcessingTime(100);
            for (String id : List.of("x", "y", "z")) {
                h.processElement(request(id, 6, 3), 0);
            }
            h.setProcessingTime(110);
            assertThat(h.getProcessingTimeService().getActiveTimerTimestamps()).containsExactly(110 + window);
            h.setProcessingTime(110 + window);
            // nothing arrived before that step: the rest ran back to back
            assertThat(h.getProcessingTimeService().getNumActiveTimers()).isZero();
            assertThat(handoffs(h)).extracting(KvHandoff::getRequestId).containsOnly("x", "y", "z");
        }
    }

    @Test
    void aRestoreBeforeTheHandoffPrefillsAgainIdentically() throws Exception {
        GenerateRequest r = request("b", 14, 6);
        OperatorSubtaskState snapshot;
        List<Response> lostTokens;
        List<KvHandoff> lostRecords;
        try (var h = harness()) {
            EngineHarness.open(h);
            h.processElement(r, 0);
            h.prepareSnapshotPreBarrier(1);
            assertThat(handoffs(h)).as("no step before the checkpoint").isEmpty();
            snapshot = h.snapshot(1, 1);
            runToIdle(h); // after the checkpoint: lost with the failure
            lostTokens = new ArrayList<>(h.extractOutputValues());
            lostRecords = handoffs(h);
        }
        try (var restored = harness()) {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            runToIdle(restored);
            assertThat(restored.extractOutputValues()).isEqualTo(lostTokens);
            List<KvHandoff> again = handoffs(restored);
            assertThat(again).hasSameSizeAs(lostRecords);
            for (int i = 0; i < again.size(); i++) {
                assertThat(again.get(i).getData()).isEqualTo(lostRecords.get(i).getData());
                assertThat(again.get(i).getPart()).isEqualTo(i);
            }
            assertThat(again.get(0).getHeader().getResourceStates())
                    .isEqualTo(lostRecords.get(0).getHeader().getResourceStates());
        }
    }

    @Test
    void aRequestIdReusedAfterItsHandoffOrResultGets409() throws Exception {
        try (var h = harness()) {
            EngineHarness.open(h);
            h.processElement(request("a", 11, 5), 0);
            h.processElement(request("one", 6, 1), 0);
            runToIdle(h);
            int records = handoffs(h).size();
            h.getOutput().clear();

            h.processElement(request("a", 12, 5), 0);
            h.processElement(request("one", 7, 1), 0);
            runToIdle(h);
            TestRequests.Collected out = new TestRequests.Collected();
            out.addAll(h.extractOutputValues());
            assertThat(out.tokens).isEmpty();
            assertThat(out.results).isEmpty();
            assertThat(out.errors).extracting(ErrorEvent::getRequestId, ErrorEvent::getCode)
                    .containsExactly(tuple("a", 409), tuple("one", 409));
            assertThat(handoffs(h)).as("no second hand-off").hasSize(records);
        }
    }
}
