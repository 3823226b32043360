package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.engine.SameDeviceHandoffTest.colocated;
import static org.mstar.engine.SameDeviceHandoffTest.options;
import static org.mstar.engine.SameDeviceHandoffTest.workload;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.SameDeviceHandoffTest.Tokens;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.kv.KvBytesServer;

/**
 * A prefill and a decode engine handing off by ticket ({@link LlamaEngine#handOffOverNetwork}), each with its own
 * server as in two TaskManagers, or both on one server with the engines on two CPU devices (as cuda:0 and cuda:1 of one
 * TaskManager): the records carry about 100 bytes whatever the prompt, the decode side pulls the KV and generates the
 * colocated engine's tokens; when the bytes cannot be pulled (the prefill side's server is gone, the ticket's length
 * is not the bytes', or the ticket is of the first format) it recomputes the prompt, with the same tokens. In one JVM
 * the pulls take the bytes without a socket; {@code KvBytesServerTest} covers the TCP path.
 */
class NetworkHandoffTest {
    @TempDir
    static Path dir;
    static CpuDevice cpu;
    static LlamaModel model;
    static LlamaModel prefillModel;
    static LlamaModel decodeModel;
    /** A second CPU device with its own copy of the weights, as cuda:1 beside cuda:0. */
    static CpuDevice secondCpu;
    static LlamaModel onSecondDevice;

    @BeforeAll
    static void load() throws Exception {
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 3, dir, cpu);
        prefillModel = new LlamaModel(model.weights(), DType.F32, "random:3");
        decodeModel = new LlamaModel(model.weights(), DType.F32, "random:3");
        secondCpu = new CpuDevice(2);
        onSecondDevice = RandomModels.load(RandomModels.llama(), 3, dir.resolve("second"), secondCpu);
    }

    @AfterAll
    static void close() {
        onSecondDevice.close();
        secondCpu.close();
        model.close();
        cpu.close();
    }

    private static LlamaEngine networked(LlamaModel m, EngineOptions options, KvBytesServer server) {
        LlamaEngine e = RandomModels.engine(m, options);
        e.handOffOverNetwork(server);
        return e;
    }

    /** Runs {@code requests} through prefill and decode, each hand-off altered by {@code onTheWay} before it arrives. */
    private static Map<String, List<Integer>> disaggregated(List<GenerationRequest> requests, KvBytesServer prefillSide,
                                                            KvBytesServer decodeSide,
                                                            UnaryOperator<PrefillHandoff> onTheWay, long[] kvBytes) {
        return disaggregated(requests, prefillSide, decodeModel, decodeSide, onTheWay, kvBytes);
    }

    private static Map<String, List<Integer>> disaggregated(List<GenerationRequest> requests, KvBytesServer prefillSide,
                                                            LlamaModel decodeModel, KvBytesServer decodeSide,
                                                            UnaryOperator<PrefillHandoff> onTheWay, long[] kvBytes) {
        Map<String, GenerationRequest> byId = new HashMap<>();
        requests.forEach(r -> byId.put(r.requestId(), r));
        try (LlamaEngine prefill = networked(prefillModel, options(8, 200, EngineRole.PREFILL), prefillSide);
             LlamaEngine decode = networked(decodeModel, options(64, 200, EngineRole.DECODE), decodeSide)) {
            Tokens t = new Tokens();
            requests.forEach(prefill::submit);
            for (int i = 0; prefill.hasWork() || decode.hasWork(); i++) {
                assertThat(i).isLessThan(2_000);
                StepResult p = prefill.step();
                t.add(p);
                for (PrefillHandoff h : p.handoffs()) {
                    assertThat(h.states().get(LlamaModel.KV).remaining()).as("a ticket, no pages").isLessThan(120);
                    decode.receive(byId.get(h.requestId()), onTheWay.apply(h));
                }
                t.add(decode.step());
                prefillModel.resources().kv().assertPagesConserved();
                decodeModel.resources().kv().assertPagesConserved();
            }
            kvBytes[0] = decode.handoffBytesCopied();
            return t.sequences();
        }
    }

    @Test
    void theDecodeSidePullsTheKvAndGeneratesTheColocatedTokens() throws Exception {
        List<GenerationRequest> requests = workload(5, 9);
        long[] kvBytes = new long[1];
        try (KvBytesServer prefillSide = KvBytesServer.start("127.0.0.1", 1L << 30);
             KvBytesServer decodeSide = KvBytesServer.start("127.0.0.1", 1L << 30)) {
            assertThat(disaggregated(requests, prefillSide, decodeSide, h -> h, kvBytes))
                    .isEqualTo(colocated(model, requests));
            assertThat(kvBytes[0]).as("KV bytes pulled and copied into the decode pool").isPositive();
            assertThat(prefillSide.held()).as("bytes left unpulled").isZero();
        }
    }

    @Test
    void prefillOnOneDeviceAndDecodeOnAnotherOfOneProcessHandOffThroughTheHost() throws Exception {
        List<GenerationRequest> requests = workload(13, 6);
        long[] kvBytes = new long[1];
        try (KvBytesServer oneServer = KvBytesServer.start("127.0.0.1", 1L << 30)) {
            assertThat(disaggregated(requests, oneServer, onSecondDevice, oneServer, h -> h, kvBytes))
                    .isEqualTo(colocated(model, requests));
            assertThat(kvBytes[0]).as("KV bytes copied into the second device's pool").isPositive();
            assertThat(oneServer.held()).isZero();
            onSecondDevice.resources().kv().assertPagesConserved();
        }
    }

    @Test
    void bytesGoneWithTheirServerAreRecomputedWithTheSameTokens() throws Exception {
        List<GenerationRequest> requests = workload(7, 5);
        long[] kvBytes = new long[1];
        KvBytesServer prefillSide = KvBytesServer.start("127.0.0.1", 1L << 30);
        prefillSide.close(); // the prefill TaskManager died after sending its tickets
        try (KvBytesServer decodeSide = KvBytesServer.start("127.0.0.1", 1L << 30)) {
            assertThat(disaggregated(requests, prefillSide, decodeSide, h -> h, kvBytes))
                    .isEqualTo(colocated(model, requests));
            assertThat(kvBytes[0]).as("nothing pulled: every prompt recomputed").isZero();
        }
    }

    @Test
    void bytesOfAnotherLengthThanTheTicketsAreRecomputedWithTheSameTokens() throws Exception {
        long failedBefore = KvBytesServer.pullCounts().failed();
        int requests = recomputedWithTheSameTokens(11, h -> altered(h, -4, 1)); // the ticket ends with the length
        assertThat(KvBytesServer.pullCounts().failed() - failedBefore).as("failed pulls")
                .isGreaterThanOrEqualTo(requests);
    }

    @Test
    void aTicketOfTheFirstFormatIsRecomputedWithTheSameTokens() throws Exception {
        recomputedWithTheSameTokens(17, h -> altered(h, 3, -1)); // "KVN1" for "KVN2": the magic's top byte, one less
    }

    /** Runs a workload with each hand-off altered by {@code onTheWay}; returns how many requests it had. */
    private static int recomputedWithTheSameTokens(long seed, UnaryOperator<PrefillHandoff> onTheWay) throws Exception {
        List<GenerationRequest> requests = workload(seed, 4);
        long[] kvBytes = new long[1];
        try (KvBytesServer prefillSide = KvBytesServer.start("127.0.0.1", 1L << 30);
             KvBytesServer decodeSide = KvBytesServer.start("127.0.0.1", 1L << 30)) {
            assertThat(disaggregated(requests, prefillSide, decodeSide, onTheWay, kvBytes))
                    .isEqualTo(colocated(model, requests));
            assertThat(kvBytes[0]).as("nothing imported: every prompt recomputed").isZero();
        }
        return requests.size();
    }

    /** {@code h} with byte {@code at} of its KV ticket (from the end when negative) changed by {@code delta}. */
    private static PrefillHandoff altered(PrefillHandoff h, int at, int delta) {
        Map<String, ByteBuffer> states = new LinkedHashMap<>(h.states());
        ByteBuffer kv = states.get(LlamaModel.KV);
        ByteBuffer altered = ByteBuffer.allocate(kv.remaining()).put(kv.duplicate()).flip();
        int i = at < 0 ? altered.limit() + at : at;
        altered.put(i, (byte) (altered.get(i) + delta));
        states.put(LlamaModel.KV, altered);
        return new PrefillHandoff(h.requestId(), h.prompt(), h.generated(), states);
    }
}
