package org.mstar.engine;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.kv.KVSequenceInfo;
import org.mstar.resources.kv.PublishedKVInfo;
import org.mstar.resources.position.PublishedPositionInfo;
import org.mstar.resources.runner.StepRunner;

/**
 * Both ends of a disaggregated request's hand-off. The prefill side publishes every resource's state through the
 * runner and copies the published KV pages out; the decode side offers those pages to its KV manager's transport
 * and lets the runner's monotonic {@code admitRetrieve} import them, which takes whole pages its own prefix index
 * already holds and reads only the rest.
 */
final class HandoffExchange {
    private final StepRunner runner;
    private final ModelRunner.ResourceKeys keys;
    private final HandoffKvTransport transport;

    HandoffExchange(StepRunner runner, ModelRunner.ResourceKeys keys, HandoffKvTransport transport) {
        this.runner = runner;
        this.keys = keys;
        this.transport = transport;
    }

    /** What a retrieval did: the runner's answer, and how many leading tokens the local prefix cache served. */
    record Retrieval(FullAdmitOutcome outcome, int localTokens) {}

    /** The published state of {@code r}, which has just sampled its first token, with its KV page contents. */
    PrefillHandoff publish(LiveRequest r) {
        Map<String, PublishedInfo> published = runner.publish(List.of(r.id()), keys.node(), keys.walk(),
                Map.of()).getOrDefault(r.id(), Map.of());
        Map<String, PrefillHandoff.KvStream> kv = new HashMap<>();
        Map<String, Integer> positions = new HashMap<>();
        published.forEach((key, info) -> {
            if (info instanceof PublishedKVInfo k) {
                k.forRank(0).forEach((label, seq) -> kv.put(label, new PrefillHandoff.KvStream(seq.seqLen(),
                        seq.resetGeneration(), transport.export(seq.pageIndices(), 0, seq.seqLen()))));
            } else if (info instanceof PublishedPositionInfo p) {
                positions.putAll(p.counters());
            } else {
                throw new IllegalStateException("resource '" + key + "' publishes " + info.getClass().getSimpleName()
                        + ", which a prefill hand-off does not carry");
            }
        });
        return new PrefillHandoff(r.id(), r.prompt, r.generated.toArray(), kv, positions);
    }

    /** Import {@code h} into the (opened) request {@code h.requestId()}. */
    Retrieval retrieve(PrefillHandoff h) {
        PublishedKVInfo kvInfo = new PublishedKVInfo(1);
        List<String> offered = new ArrayList<>();
        h.kv().forEach((label, s) -> {
            String d = transport.offer(h.requestId(), label, s.pages());
            offered.add(d);
            kvInfo.put(0, label, new KVSequenceInfo(s.seqLen(), d,
                    IntStream.range(0, s.pages().numPages()).toArray(), s.resetGeneration()));
        });
        Map<String, PublishedInfo> published = new HashMap<>();
        published.put(keys.kv(), kvInfo);
        if (!h.positions().isEmpty()) {
            published.put(keys.position(), new PublishedPositionInfo(h.positions()));
        }
        FullAdmitOutcome o = runner.admitRetrieve(h.requestId(), keys.node(), keys.walk(), published);
        int local = h.prompt().length;
        for (String d : offered) {
            int from = transport.withdraw(d);
            if (from >= 0) {
                local = Math.min(local, from);
            }
        }
        return new Retrieval(o, local);
    }

    /** Page bytes the decode side copied from hand-offs so far. */
    long bytesCopied() {
        return transport.bytesCopied();
    }
}
