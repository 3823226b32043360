package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.engine.SameDeviceHandoffTest.colocated;
import static org.mstar.engine.SameDeviceHandoffTest.handOff;
import static org.mstar.engine.SameDeviceHandoffTest.options;
import static org.mstar.engine.SameDeviceHandoffTest.workload;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.SameDeviceHandoffTest.Tokens;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvBytesTicket;

/**
 * A prefill and a decode engine handing off by ticket ({@link LlamaEngine#handOffOverNetwork}), each with its own
 * server as in two TaskManagers, or both on one server with the engines on two CPU devices (as cuda:0 and cuda:1 of one
 * TaskManager): the records carry about 100 bytes whatever the prompt, the decode side pulls the KV and generates the
 * colocated engine's tokens; when the bytes cannot be pulled (the prefill side's server is gone, the ticket's length
 * is not the bytes', or the ticket is of the first format) it recomputes the prompt, with the same tokens; a pull
 * under way holds back only its own request. In one JVM the pulls take the bytes without a socket (but through the
 * relay of that test); {@code KvBytesServerTest} covers the TCP path.
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
        try (LlamaEngine prefill = networked(prefillModel, options(8, 200, EngineRole.PREFILL), prefillSide);
             LlamaEngine decode = networked(decodeModel, options(64, 200, EngineRole.DECODE), decodeSide)) {
            Tokens t = handOff(prefill, decode, requests, h -> {
                assertThat(h.states().get(LlamaModel.KV).remaining()).as("a ticket, no pages").isLessThan(120);
                return onTheWay.apply(h);
            }, prefillModel, decodeModel);
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

    /**
     * While one hand-off's bytes are still on their way (a relay holds them until the test opens it), the decode
     * engine steps its running request; the held one is imported once they arrive, with the colocated tokens. A pull
     * on the engine's own thread would block in {@code receive} until the timeout.
     */
    @Test
    @Timeout(120)
    void aPullUnderWayHoldsBackOnlyItsOwnRequest() throws Exception {
        GenerationRequest running = GenerationRequest.builder("running").promptTokenIds(new int[] {1, 5, 9, 4, 7})
                .maxTokens(12).ignoreEos(true).build();
        GenerationRequest pulled = GenerationRequest.builder("pulled").promptTokenIds(new int[] {3, 8, 2, 6, 11, 13, 4})
                .maxTokens(5).ignoreEos(true).build();
        CountDownLatch open = new CountDownLatch(1);
        try (KvBytesServer prefillSide = KvBytesServer.start("127.0.0.1", 1L << 30);
             KvBytesServer decodeSide = KvBytesServer.start("127.0.0.1", 1L << 30);
             ServerSocketChannel relay = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
             LlamaEngine prefill = networked(prefillModel, options(8, 200, EngineRole.PREFILL), prefillSide);
             LlamaEngine decode = networked(decodeModel, options(64, 200, EngineRole.DECODE), decodeSide)) {
            Tokens t = new Tokens();
            decode.receive(running, handoffOf(prefill, running, t));
            t.add(decode.step());
            PrefillHandoff held = handoffOf(prefill, pulled, t);
            CompletableFuture<Void> relayed = CompletableFuture.runAsync(() -> relayOnce(relay, open));
            decode.receive(pulled, throughRelay(held, relay.socket().getLocalPort()));
            for (int i = 0; i < 3; i++) {
                StepResult r = decode.step();
                t.add(r);
                assertThat(r.tokens()).as("step %d while the bytes are held", i).isNotEmpty()
                        .allMatch(token -> token.requestId().equals("running"));
            }
            open.countDown();
            for (int i = 0; decode.hasWork(); i++) {
                assertThat(i).isLessThan(200);
                t.add(decode.step());
            }
            relayed.join();
            assertThat(t.sequences()).isEqualTo(colocated(model, List.of(running, pulled)));
        }
    }

    /** Steps {@code prefill} through {@code request} alone; its hand-off (its first token goes into {@code t}). */
    private static PrefillHandoff handoffOf(LlamaEngine prefill, GenerationRequest request, Tokens t) {
        prefill.submit(request);
        for (int i = 0; i < 100; i++) {
            StepResult r = prefill.step();
            t.add(r);
            if (!r.handoffs().isEmpty()) {
                return r.handoffs().get(0);
            }
        }
        throw new AssertionError("no hand-off of " + request.requestId());
    }

    /** {@code h} with its ticket sent to a relay on {@code port} under a server id of no server in this process. */
    private static PrefillHandoff throughRelay(PrefillHandoff h, int port) {
        ByteBuffer kv = h.states().get(LlamaModel.KV).duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int magic = kv.getInt();
        KvBytesTicket real = KvBytesTicket.get(kv);
        relayTo = real;
        KvBytesTicket viaRelay = new KvBytesTicket(real.host(), port, UUID.randomUUID(), real.id(), real.length());
        ByteBuffer state = ByteBuffer.allocate(4 + viaRelay.size()).order(ByteOrder.LITTLE_ENDIAN).putInt(magic);
        Map<String, ByteBuffer> states = new LinkedHashMap<>(h.states());
        states.put(LlamaModel.KV, viaRelay.put(state).flip());
        return new PrefillHandoff(h.requestId(), h.prompt(), h.generated(), states);
    }

    /** The ticket {@link #relayOnce} asks for in place of the one it was given. */
    private static volatile KvBytesTicket relayTo;

    /** Accepts one pull, waits for {@code open}, then asks the real server for {@link #relayTo} and relays its answer. */
    private static void relayOnce(ServerSocketChannel relay, CountDownLatch open) {
        try (SocketChannel puller = relay.accept()) {
            ByteBuffer ask = ByteBuffer.allocate(24);
            while (ask.hasRemaining()) {
                puller.read(ask);
            }
            open.await();
            try (SocketChannel server = SocketChannel.open(new InetSocketAddress(relayTo.host(), relayTo.port()))) {
                ByteBuffer real = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN)
                        .putLong(relayTo.server().getMostSignificantBits())
                        .putLong(relayTo.server().getLeastSignificantBits()).putLong(relayTo.id()).flip();
                while (real.hasRemaining()) {
                    server.write(real);
                }
                ByteBuffer buf = ByteBuffer.allocate(1 << 16);
                while (server.read(buf.clear()) >= 0) {
                    for (buf.flip(); buf.hasRemaining(); ) {
                        puller.write(buf);
                    }
                }
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
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
