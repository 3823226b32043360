package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.mstar.resources.RetentionPolicy;

/**
 * One (request, label) KV stream. A plain holder: the manager's parts read and write its fields under
 * the manager's lock.
 */
final class CacheStream {
    final String requestId;
    final String label;

    /**
     * Pages in token order. A high-water list: it may hold more pages than {@link #storedLen} needs
     * (reserved by an admit whose step did not count its tokens), and admit only ever tops it up, so a
     * retried admit finds its pages already there.
     */
    final List<Integer> pages = new ArrayList<>();
    /** Committed tokens resident on {@link #pages}. */
    int storedLen;
    /** Tokens retention compacted off the front; surviving tokens keep their absolute positions. */
    int released;
    /** Head tokens retention never releases; null until a policy or {@code protectPrefix} sets it. */
    Integer protectedPrefix;
    RetentionPolicy retention;

    /** A read of published pages in flight (PD pull): its result lands on {@link #readPages}. */
    CompletableFuture<KvPagePayload> readFuture;
    int[] readPages;
    /** A failed read, latched: the stream can never be served. */
    String readError;
    /** The producer's reset generation last seen; -1 before the first retrieve. */
    long remoteResetGeneration = -1;
    /** Leading tokens a retrieval took from this cache's prefix index instead of reading them. */
    int retrievedLocally;

    /** Prefix-cache keys of this stream, or null when it is not keyed. */
    PrefixChain chain;
    /** Cached pages the probe matched and holds (one owner each) until admit converts them. */
    List<Integer> lease;

    boolean stepInFlight;
    boolean offloaded;
    /** Where the pages wait while offloaded, in page order. */
    int[] hostPages;

    /** Moves on every page-list or content change; plan caches and offload claims key on it. */
    long generation;
    /** Moves only when the content is replaced (reset, fork): the epoch remote readers compare. */
    long resetGeneration;

    CacheStream(String requestId, String label) {
        this.requestId = requestId;
        this.label = label;
    }

    boolean readPending() {
        return readFuture != null;
    }

    /** Absolute position of the next token: committed plus compacted. */
    int position() {
        return released + storedLen;
    }

    /** Page ids {@code [from, to)} of {@link #pages}. */
    int[] pageIds(int from, int to) {
        return pages.subList(from, to).stream().mapToInt(Integer::intValue).toArray();
    }
}
