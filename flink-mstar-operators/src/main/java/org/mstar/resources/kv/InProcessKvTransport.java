package org.mstar.resources.kv;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link KvTransport} between KV managers of one process, through a shared {@link Hub}. Every read
 * goes through {@link KvPagePayload#toBytes()} and back, so it takes the path a payload crossing a
 * process would. Reads complete before {@link #read} returns.
 */
public final class InProcessKvTransport implements KvTransport {
    private final Hub hub;
    private final String name;

    /** The caches of one process, by descriptor. */
    public static final class Hub {
        private final Map<String, KvPageSource> sources = new ConcurrentHashMap<>();

        void register(String name, KvPageSource source) {
            if (sources.putIfAbsent(name, source) != null) {
                throw new IllegalStateException("a KV cache named '" + name + "' is already registered");
            }
        }

        KvPageSource source(String name) {
            return sources.get(name);
        }
    }

    /** @param name this cache's descriptor, unique within the hub */
    public InProcessKvTransport(Hub hub, String name) {
        this.hub = hub;
        this.name = name;
    }

    @Override
    public String descriptor() {
        return name;
    }

    @Override
    public void bind(KvPageSource source) {
        hub.register(name, source);
    }

    @Override
    public CompletableFuture<KvPagePayload> read(String descriptor, int[] remotePages, int startToken, int endToken) {
        KvPageSource source = hub.source(descriptor);
        if (source == null) {
            return CompletableFuture.failedFuture(new IllegalStateException("no KV cache named '" + descriptor + "'"));
        }
        try {
            byte[] wire = source.readPages(remotePages, startToken, endToken).toBytes();
            return CompletableFuture.completedFuture(KvPagePayload.fromBytes(wire));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }
}
