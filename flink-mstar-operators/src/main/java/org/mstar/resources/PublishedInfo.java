package org.mstar.resources;

/**
 * Durable per-request state one resource exports for another node or worker (for example the KV of a
 * finished prefill, or position counters), merged with {@link #update} and copied with {@link #copy}.
 */
public interface PublishedInfo {
    /** Merge a newer publication into this one, in place. */
    void update(PublishedInfo other);

    /** An independent deep copy, for deferred sending. */
    PublishedInfo copy();
}
