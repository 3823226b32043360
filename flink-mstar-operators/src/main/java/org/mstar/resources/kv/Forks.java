package org.mstar.resources.kv;

import org.mstar.resources.Fork;

/**
 * Applying a fork: an eager full copy of the source's committed pages into the target's already
 * reserved pages (never copy-on-write, so a fork target never shares a page).
 */
final class Forks {
    private Forks() {}

    /** What a fork overwrote on its target, so a staged pre-plan can be undone. */
    record Undo(CacheStream target, int storedLen, long generation, long resetGeneration, PrefixChain chain) {
        void restore() {
            target.storedLen = storedLen;
            target.generation = generation;
            target.resetGeneration = resetGeneration;
            target.chain = chain;
        }
    }

    /**
     * Copy {@code ceil(from.storedLen / pageSize)} pages of {@code rid}'s {@code from} stream into its
     * {@code to} stream. Nothing happens when the source does not exist.
     *
     * @return what to restore to undo it, or null when nothing happened
     */
    static Undo apply(KVState st, String rid, Fork f) {
        CacheStream src = st.stream(rid, f.from());
        if (src == null) {
            return null;
        }
        CacheStream dst = st.stream(rid, f.to());
        int n = st.pagesFor(src.storedLen);
        if (dst == null || dst.pages.size() < n) {
            throw new IllegalStateException("fork " + f + " of '" + rid + "' needs " + n + " reserved target pages, "
                    + "target holds " + (dst == null ? 0 : dst.pages.size()) + ": was the step admitted?");
        }
        for (int i = 0; i < n; i++) {
            if (st.arena.numOwners(dst.pages.get(i)) > 1) {
                throw new IllegalStateException("fork target " + f.to() + " of '" + rid + "' holds shared page "
                        + dst.pages.get(i));
            }
        }
        Undo undo = new Undo(dst, dst.storedLen, dst.generation, dst.resetGeneration, dst.chain);
        st.pool.copyPages(src.pageIds(0, n), dst.pageIds(0, n));
        dst.storedLen = src.storedLen;
        // The copied content is not what the target's own prompt keys describe.
        dst.chain = null;
        dst.generation++;
        dst.resetGeneration++;
        return undo;
    }
}
