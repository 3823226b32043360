package org.mstar.resources.kv;

import java.util.concurrent.CompletableFuture;

/**
 * Moves KV pages from the cache that published them to one that retrieves them (PD disaggregation,
 * CFG branches on other devices). One transport per KV manager: it names the manager's cache to
 * readers ({@link #descriptor()}) and reads other caches' pages on its behalf.
 *
 * <p>Contract: the producer finishes its writes before it publishes, so a read sees final bytes.
 */
public interface KvTransport {

    /** What a reader needs to find this cache; travels in every published sequence. */
    String descriptor();

    /** Whether {@code descriptor} names this very cache (a manager never retrieves from itself). */
    default boolean owns(String descriptor) {
        return descriptor().equals(descriptor);
    }

    /** Serve reads of this cache's pages from {@code source}; called once, when the manager is built. */
    void bind(KvPageSource source);

    /**
     * Start reading {@code remotePages} (carrying tokens {@code [startToken, endToken)}) of the cache
     * {@code descriptor} names. A failure comes back as an exceptionally completed future.
     */
    CompletableFuture<KvPagePayload> read(String descriptor, int[] remotePages, int startToken, int endToken);

    /** The producer side of a read: the contents of some of this cache's pages. */
    @FunctionalInterface
    interface KvPageSource {
        KvPagePayload readPages(int[] pages, int startToken, int endToken);
    }
}
