package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.List;
import org.mstar.resources.RetentionPolicy;

/**
 * FIFO retention: a stream that keeps committing keeps its protected head and a window of the newest
 * tokens, releasing the oldest unprotected pages. Whole pages only: the page straddling the protected
 * prefix and a partial tail page stay, so the window may exceed the budget by up to a page, and that
 * excess is offered again at the next commit. Positions are untouched: surviving tokens keep the
 * absolute positions they were written at.
 */
final class RetentionWindow {
    private RetentionWindow() {}

    /** Take on a step's policy: its protected prefix must be committed already and agree with any set before. */
    static void adopt(CacheStream s, RetentionPolicy p) {
        if (p.protectedPrefix() > s.storedLen) {
            throw new IllegalStateException("stream " + s.label + " of '" + s.requestId + "' protects "
                    + p.protectedPrefix() + " tokens but holds only " + s.storedLen);
        }
        protect(s, p.protectedPrefix());
        s.retention = p;
    }

    static void protect(CacheStream s, int tokens) {
        if (s.protectedPrefix != null && s.protectedPrefix != tokens) {
            throw new IllegalStateException("stream " + s.label + " of '" + s.requestId + "' protects "
                    + s.protectedPrefix + " tokens; cannot change it to " + tokens);
        }
        if (s.protectedPrefix == null && s.released > 0) {
            throw new IllegalStateException("stream " + s.label + " of '" + s.requestId
                    + "' already released tokens; a prefix must be protected before any release");
        }
        s.protectedPrefix = tokens;
    }

    /** Release what the stream's policy says is past its window; returns pages released. */
    static int apply(KVState st, CacheStream s) {
        int prefix = s.protectedPrefix == null ? 0 : s.protectedPrefix;
        long excess = (long) s.storedLen - prefix - s.retention.contextBudget();
        if (excess <= 0) {
            return 0;
        }
        return releaseOldest(st, s, (int) (excess / st.pageSize));
    }

    /** Release up to {@code pages} whole pages right after the protected prefix; returns pages released. */
    static int releaseOldest(KVState st, CacheStream s, int pages) {
        int prefix = s.protectedPrefix == null ? 0 : s.protectedPrefix;
        int first = st.pagesFor(prefix);
        int k = Math.min(pages, s.storedLen / st.pageSize - first);
        if (k <= 0) {
            return 0;
        }
        List<Integer> gone = s.pages.subList(first, first + k);
        List<Integer> released = new ArrayList<>(gone);
        gone.clear();
        st.arena.releaseAll(released);
        s.storedLen -= k * st.pageSize;
        s.released += k * st.pageSize;
        // Keys describe the stream from token 0; once its head moved they no longer do.
        s.chain = null;
        s.generation++;
        return k;
    }
}
