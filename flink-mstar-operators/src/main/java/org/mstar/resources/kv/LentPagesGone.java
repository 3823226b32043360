package org.mstar.resources.kv;

/**
 * A same-device hand-off's pages are no longer lent ({@link KvShelf}): the lender took them back, closed, or lives in
 * another process. The receiver has the prompt and the generated ids, so it recomputes the KV instead.
 */
public final class LentPagesGone extends IllegalStateException {
    LentPagesGone(String message) {
        super(message);
    }
}
