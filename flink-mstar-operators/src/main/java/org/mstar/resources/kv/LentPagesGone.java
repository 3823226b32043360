package org.mstar.resources.kv;

/**
 * A hand-off's KV is no longer where its ticket says: a same-device hand-off's pages are no longer lent
 * ({@link KvShelf}: the lender took them back, closed, or lives in another process), or a network hand-off's bytes
 * cannot be pulled whole and intact ({@link KvBytesServer}: its process died, they were dropped or pulled already).
 * The receiver has the prompt and the generated ids, so it recomputes the KV instead.
 */
public final class LentPagesGone extends IllegalStateException {
    LentPagesGone(String message) {
        super(message);
    }
}
