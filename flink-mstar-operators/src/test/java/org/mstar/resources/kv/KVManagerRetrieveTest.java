package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.NODE;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.keyed;
import static org.mstar.resources.kv.KvHarness.range;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.NodeWalk;
import org.mstar.resources.StreamLabel;

class KVManagerRetrieveTest {
    private static final StreamLabel A = new StreamLabel("a", "main");

    /** Delegates to an in-process transport, counting pages read; can hold reads back or fail them. */
    static final class RecordingTransport implements KvTransport {
        final InProcessKvTransport inner;
        final List<int[]> reads = new ArrayList<>();
        boolean hold;
        boolean fail;
        final List<Runnable> held = new ArrayList<>();

        RecordingTransport(InProcessKvTransport.Hub hub, String name) {
            inner = new InProcessKvTransport(hub, name);
        }

        @Override
        public String descriptor() {
            return inner.descriptor();
        }

        @Override
        public void bind(KvPageSource source) {
            inner.bind(source);
        }

        @Override
        public CompletableFuture<KvPagePayload> read(String descriptor, int[] remotePages, int start, int end) {
            reads.add(remotePages.clone());
            if (fail) {
                return CompletableFuture.failedFuture(new IllegalStateException("link down"));
            }
            if (!hold) {
                return inner.read(descriptor, remotePages, start, end);
            }
            CompletableFuture<KvPagePayload> f = new CompletableFuture<>();
            held.add(() -> inner.read(descriptor, remotePages, start, end).thenAccept(f::complete));
            return f;
        }

        int pagesRead() {
            return reads.stream().mapToInt(r -> r.length).sum();
        }
    }

    private final InProcessKvTransport.Hub hub = new InProcessKvTransport.Hub();
    private final RecordingTransport toProducer = new RecordingTransport(hub, "prefill-0");
    private final RecordingTransport toConsumer = new RecordingTransport(hub, "decode-0");
    private final KvHarness producer = new KvHarness(KvHarness.config(32, 4).build(), toProducer);
    private final KvHarness consumer = new KvHarness(KvHarness.config(32, 4).build(), toConsumer);

    private AdmitOutcome retrieve(PublishedKVInfo pub) {
        return consumer.kv.admitRetrieve("a", NODE, DECODE, pub);
    }

    private void verifyConsumerMatchesProducer() {
        KvHarness.verify(consumer.kv, "a", "main", producer.oracle.get(A));
    }

    @Test
    void retrieveCopiesPublishedPagesAndNeverGoesBackwards() {
        producer.kv.ingestRequest("a", null);
        consumer.kv.ingestRequest("a", null);
        producer.extend("main", 1, Map.of("a", 10));
        PublishedKVInfo first = (PublishedKVInfo) producer.kv.publish("a");
        assertThat(first.forRank(0).get("main").seqLen()).isEqualTo(10);

        assertThat(retrieve(first)).isEqualTo(AdmitOutcome.OK);
        verifyConsumerMatchesProducer();
        assertThat(toConsumer.pagesRead()).isEqualTo(3);

        producer.extend("main", 50, Map.of("a", 5));
        PublishedKVInfo second = (PublishedKVInfo) producer.kv.publish("a");
        assertThat(retrieve(second)).isEqualTo(AdmitOutcome.OK);
        verifyConsumerMatchesProducer();
        // Only pages from the one holding token 10 on moved.
        assertThat(toConsumer.reads.get(1)).hasSize(2);

        long gen = consumer.stream("a", "main").generation;
        assertThat(retrieve(first)).isEqualTo(AdmitOutcome.OK);
        assertThat(retrieve(second)).isEqualTo(AdmitOutcome.OK);
        assertThat(consumer.stream("a", "main").storedLen).isEqualTo(15);
        assertThat(consumer.stream("a", "main").generation).isEqualTo(gen);
        assertThat(toConsumer.reads).hasSize(2);
        consumer.kv.assertPagesConserved();
    }

    @Test
    void aWorldSizeMismatchIsTerminal() {
        consumer.kv.ingestRequest("a", null);
        AdmitOutcome o = retrieve(new PublishedKVInfo(2));
        assertThat(o.ok()).isFalse();
        assertThat(o.reason()).isInstanceOfSatisfying(AdmitRuntimeError.class, e -> {
            assertThat(e.terminal()).isTrue();
            assertThat(e.requestIds()).containsExactly("a");
        });
        assertThat(consumer.kv.admitRetrieve("a", NODE, DECODE, null)).isEqualTo(AdmitOutcome.OK);
    }

    @Test
    void aProducerThatRewoundResetsTheCopy() {
        producer.kv.ingestRequest("a", null);
        consumer.kv.ingestRequest("a", null);
        producer.extend("main", 1, Map.of("a", 10));
        retrieve((PublishedKVInfo) producer.kv.publish("a"));
        producer.kv.resetRequest("a", true);
        producer.oracle.remove(A);
        producer.extend("main", 300, Map.of("a", 6));
        assertThat(retrieve((PublishedKVInfo) producer.kv.publish("a"))).isEqualTo(AdmitOutcome.OK);
        verifyConsumerMatchesProducer();
        assertThat(consumer.stream("a", "main").resetGeneration).isEqualTo(1);
        consumer.kv.assertPagesConserved();
    }

    @Test
    void wholePagesTheLocalIndexHoldsDoNotMove() {
        int[] prompt = range(1, 14);
        producer.ingestAndPrefill("a", prompt);
        consumer.kv.enablePrefixCache(new byte[] {7}, Set.of(PREFILL, DECODE));
        consumer.ingestAndPrefill("x", prompt);

        consumer.kv.ingestRequest("a", keyed(prompt, 4));
        assertThat(retrieve((PublishedKVInfo) producer.kv.publish("a"))).isEqualTo(AdmitOutcome.OK);
        assertThat(toConsumer.reads).hasSize(1);
        assertThat(toConsumer.reads.get(0)).containsExactly(producer.stream("a", "main").pages.get(3));
        assertThat(consumer.stream("a", "main").pages.subList(0, 3))
                .isEqualTo(consumer.stream("x", "main").pages.subList(0, 3));
        verifyConsumerMatchesProducer();
        consumer.kv.assertPagesConserved();
    }

    @Test
    void aReadInFlightIsNotReadyUntilItLands() {
        producer.kv.ingestRequest("a", null);
        consumer.kv.ingestRequest("a", null);
        producer.extend("main", 1, Map.of("a", 7));
        PublishedKVInfo pub = (PublishedKVInfo) producer.kv.publish("a");
        toConsumer.hold = true;
        assertThat(retrieve(pub)).isEqualTo(AdmitOutcome.NOT_READY);
        assertThat(retrieve(pub)).isEqualTo(AdmitOutcome.NOT_READY);
        assertThat(toConsumer.reads).hasSize(1);
        assertThat(consumer.kv.offload("a")).isZero();
        toConsumer.held.forEach(Runnable::run);
        assertThat(retrieve(pub)).isEqualTo(AdmitOutcome.OK);
        verifyConsumerMatchesProducer();
    }

    @Test
    void aFailedReadLatchesAsTerminal() {
        producer.kv.ingestRequest("a", null);
        consumer.kv.ingestRequest("a", null);
        producer.extend("main", 1, Map.of("a", 7));
        PublishedKVInfo pub = (PublishedKVInfo) producer.kv.publish("a");
        toConsumer.fail = true;
        AdmitOutcome o = retrieve(pub);
        assertThat(o.ok()).isFalse();
        assertThat(o.reason().terminal()).isTrue();
        assertThat(o.reason().message()).contains("link down");
        toConsumer.fail = false;
        assertThat(retrieve(pub).reason().terminal()).isTrue();
    }

    @Test
    void aCacheNeverRetrievesItsOwnPublication() {
        producer.kv.ingestRequest("a", null);
        producer.extend("main", 1, Map.of("a", 7));
        PublishedKVInfo pub = (PublishedKVInfo) producer.kv.publish("a");
        producer.kv.resetRequest("a", false);
        assertThat(producer.kv.admitRetrieve("a", NODE, DECODE, pub)).isEqualTo(AdmitOutcome.OK);
        assertThat(producer.stream("a", "main").storedLen).isZero();
        assertThat(toProducer.reads).isEmpty();
    }

    @Test
    void publishLabelsFollowThePublishMaps() {
        KVReqConfig cfg = new KVReqConfig(null, null, null,
                Map.of(new NodeWalk(NODE, PREFILL), List.of("main", "absent")), null, null, null, null, true, null, null);
        producer.kv.ingestRequest("a", cfg);
        producer.extend("main", 1, Map.of("a", 3));
        producer.extend("aux", 1, Map.of("a", 2));
        PublishedKVInfo step = (PublishedKVInfo) producer.kv.publishForStep("a", NODE, PREFILL);
        assertThat(step.forRank(0).keySet()).containsExactly("main");
        assertThat(producer.kv.publishForStep("a", NODE, DECODE)).isNull();
        assertThat(producer.kv.publishAfterStop("a", NODE, PREFILL)).isNull();
        assertThat(((PublishedKVInfo) producer.kv.publish("a")).forRank(0).keySet()).containsExactly("main", "aux");
        assertThat(cfg.publishLabels("n", "w", List.of("x"), false)).isEmpty();
        assertThat(KVReqConfig.defaults().publishLabels("n", "w", List.of("x", "y"), false)).containsExactly("x", "y");
    }

    @Test
    void publishInfoMergesPerRankAndCopiesDeeply() throws Exception {
        PublishedKVInfo r0 = new PublishedKVInfo(2);
        r0.put(0, "main", new KVSequenceInfo(5, "p0", new int[] {1, 2}, 0));
        PublishedKVInfo r1 = new PublishedKVInfo(2);
        r1.put(1, "main", new KVSequenceInfo(5, "p1", new int[] {3, 4}, 0));
        r1.put(0, "main", new KVSequenceInfo(9, "p0", new int[] {1, 2, 3}, 1));
        PublishedKVInfo copy = r0.copy();
        r0.update(r1);
        assertThat(r0.forRank(0).get("main").seqLen()).isEqualTo(9);
        assertThat(r0.forRank(1).get("main").pageIndices()).containsExactly(3, 4);
        assertThat(copy.forRank(0).get("main").seqLen()).isEqualTo(5);
        assertThat(copy.forRank(1)).isEmpty();

        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(r0);
            out.writeObject(new KvPagePayload(1, 1, 2, 1, 1, 1, DType.BF16, 3, 4, new byte[] {1, 2, 3, 4}));
        }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            PublishedKVInfo back = (PublishedKVInfo) in.readObject();
            assertThat(back.forRank(1).get("main").descriptor()).isEqualTo("p1");
            KvPagePayload p = (KvPagePayload) in.readObject();
            assertThat(p.data()).containsExactly(1, 2, 3, 4);
        }
        KvPagePayload p = new KvPagePayload(2, 1, 2, 1, 1, 1, DType.F32, 0, 1, new byte[16]);
        KvPagePayload q = KvPagePayload.fromBytes(p.toBytes());
        assertThat(q.dtype()).isEqualTo(DType.F32);
        assertThat(q.layers()).isEqualTo(2);
        assertThat(q.endToken()).isEqualTo(1);
    }

    @Test
    void retrieveTouchesOnlyTheLabelsTheNodeAndWalkNeed() {
        producer.kv.ingestRequest("a", null);
        producer.extend("main", 1, Map.of("a", 6));
        producer.extend("aux", 40, Map.of("a", 3));
        consumer.kv.ingestRequest("a", new KVReqConfig(null, null,
                Map.of(new NodeWalk(NODE, DECODE), List.of("aux")), null, null, null, null, null, true, null, null));
        assertThat(retrieve((PublishedKVInfo) producer.kv.publish("a"))).isEqualTo(AdmitOutcome.OK);
        assertThat(consumer.stream("a", "aux").storedLen).isEqualTo(3);
        assertThat(consumer.stream("a", "main").storedLen).isZero();
        KvHarness.verify(consumer.kv, "a", "aux", producer.oracle.get(new StreamLabel("a", "aux")));
        // an unknown node falls back to the request's default labels: "main"
        assertThat(consumer.kv.admitRetrieve("a", "other-node", DECODE, producer.kv.publish("a"))).isEqualTo(AdmitOutcome.OK);
        verifyConsumerMatchesProducer();
    }
}
