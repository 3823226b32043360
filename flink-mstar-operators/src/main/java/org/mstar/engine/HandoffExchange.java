package org.mstar.engine;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvShelf;
import org.mstar.resources.kv.LentPagesGone;
import org.mstar.resources.runner.StepRunner;

/**
 * Both ends of a disaggregated request's hand-off, through the model's codecs ({@link ModelRunner#handoffCodecs()}).
 * The prefill side publishes every resource's state through the runner and encodes each with its resource's codec;
 * the decode side decodes them with its own resources' codecs and lets the runner's monotonic
 * {@code admitRetrieve} import them. What the bytes hold is the resources' business: the KV cache's carry its
 * pages, of which it reads only those its own prefix index lacks.
 */
final class HandoffExchange {
    private final StepRunner runner;
    private final ModelRunner.ResourceKeys keys;
    /** Read by the inbox's pulling thread as well, hence replaced whole. */
    private volatile Map<String, PublishedInfoCodec<?>> codecs;
    private final KVManager kv;
    private boolean network;

    HandoffExchange(StepRunner runner, ModelRunner.ResourceKeys keys, Map<String, PublishedInfoCodec<?>> codecs,
                    KVManager kv) {
        this.runner = runner;
        this.keys = keys;
        this.codecs = Map.copyOf(codecs);
        this.kv = kv;
    }

    /** What a retrieval did: the runner's answer, and how many leading tokens the local prefix cache served. */
    record Retrieval(FullAdmitOutcome outcome, int localTokens) {}

    /** The published state of {@code r}, which has just sampled its first token. */
    PrefillHandoff publish(LiveRequest r) {
        Map<String, PublishedInfo> published = runner.publish(List.of(r.id()), keys.node(), keys.walk(),
                Map.of()).getOrDefault(r.id(), Map.of());
        Map<String, ByteBuffer> states = new LinkedHashMap<>();
        published.forEach((key, info) -> states.put(key, codec(key).encodeInfo(info)));
        return new PrefillHandoff(r.id(), r.prompt, r.generated.toArray(), states);
    }

    /**
     * The publications {@code h} carries, each decoded by its resource's codec (views of {@code h}'s bytes).
     *
     * @throws IllegalArgumentException when a state is not its codec's encoding or does not fit this side
     */
    Map<String, PublishedInfo> decode(PrefillHandoff h) {
        Map<String, PublishedInfo> published = new LinkedHashMap<>();
        h.states().forEach((key, bytes) -> published.put(key, codec(key).decode(bytes)));
        return published;
    }

    /**
     * Import {@code published} into the (opened) request {@code requestId}.
     *
     * @throws LentPagesGone when pages lent on this device went away (their cache closed)
     */
    Retrieval retrieve(String requestId, Map<String, PublishedInfo> published) {
        FullAdmitOutcome o = runner.admitRetrieve(requestId, keys.node(), keys.walk(), published);
        return new Retrieval(o, kv.retrievedFromPrefixCache(requestId));
    }

    /**
     * Hand-offs with a cache of this process go by handle from now on: the KV cache lends its pages through
     * {@code shelf} (prefill side) and claims lent pages from it (decode side), see {@link KVManager#lendingCodec}.
     * Both sides must use their process's shelf; hand-offs carrying pages are still taken.
     */
    void lendOnDevice(KvShelf shelf) {
        Map<String, PublishedInfoCodec<?>> with = new LinkedHashMap<>(codecs);
        with.replaceAll((key, codec) -> codec == kv.codec() ? kv.lendingCodec(shelf) : codec);
        codecs = Map.copyOf(with);
    }

    /**
     * Hand-offs go by ticket from now on: the KV cache offers its encoded pages on {@code server} (prefill side) and
     * pulls the pages of tickets from their servers (decode side), see {@link KVManager#networkCodec}. Hand-offs
     * carrying pages are still taken; not with {@link #lendOnDevice}.
     */
    void handOffOverNetwork(KvBytesServer server) {
        Map<String, PublishedInfoCodec<?>> with = new LinkedHashMap<>(codecs);
        with.replaceAll((key, codec) -> codec == kv.codec() ? kv.networkCodec(server, kv.codec()) : codec);
        codecs = Map.copyOf(with);
        network = true;
    }

    /** Whether hand-offs go by ticket ({@link #handOffOverNetwork}): decoding one pulls its bytes. */
    boolean pullsOverNetwork() {
        return network;
    }

    /** Gives back what a hand-off that will not be imported holds (lent pages), decoding it for that. */
    void discard(PrefillHandoff h) {
        if (network) {
            return; // a ticket holds nothing here, and bytes never pulled are dropped by their server past its bound
        }
        try {
            decode(h).values().forEach(PublishedInfo::release);
        } catch (LentPagesGone e) {
            // nothing lent is left to give back
        }
    }

    /** Page bytes the decode side copied from hand-offs so far, through the host. */
    long bytesCopied() {
        return kv.retrievedBytes();
    }

    /** Page bytes the decode side copied on the device from pages lent by a prefill cache there. */
    long lentBytesCopied() {
        return kv.lentBytesCopied();
    }

    private PublishedInfoCodec<?> codec(String key) {
        PublishedInfoCodec<?> codec = codecs.get(key);
        if (codec == null) {
            throw new IllegalArgumentException("resource '" + key + "' has state a hand-off does not carry: the model"
                    + " has no codec for it");
        }
        return codec;
    }
}
