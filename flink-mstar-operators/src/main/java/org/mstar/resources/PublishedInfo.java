package org.mstar.resources;

import java.util.stream.IntStream;

/**
 * Durable per-request state one resource exports for another node or worker (for example the KV of a
 * finished prefill, or position counters), merged with {@link #update} and copied with {@link #copy}.
 */
public interface PublishedInfo {
    /** Merge a newer publication into this one, in place. */
    void update(PublishedInfo other);

    /** An independent deep copy, for deferred sending. */
    PublishedInfo copy();

    /**
     * Tokens stored per sequence this info carries, for a receiver to check them against the request they belong
     * to; empty for an info that stores no sequence.
     */
    default IntStream storedLengths() {
        return IntStream.empty();
    }

    /**
     * Gives back what a decoded info holds beyond its bytes (pages a publisher on the same device lent it), once the
     * receiver imported it or dropped it; idempotent, and a no-op for an info that holds nothing.
     */
    default void release() {}
}
