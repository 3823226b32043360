package org.mstar.resources.kv;

import java.util.List;
import java.util.Set;
import org.mstar.resources.KVReqConfig;

/**
 * The open prefix cache of one KV manager: the process root every key is re-rooted under, the walks
 * whose streams are keyed, and the {@link PrefixIndex}.
 */
final class PrefixCache {
    private final byte[] root;
    private final Set<String> walks;
    private final PrefixIndex index;
    private final int pageSize;

    PrefixCache(byte[] root, Set<String> walks, PrefixIndex index, int pageSize) {
        this.root = root.clone();
        this.walks = Set.copyOf(walks);
        this.index = index;
        this.pageSize = pageSize;
    }

    PrefixIndex index() {
        return index;
    }

    boolean keyedWalk(String walk) {
        return walks.contains(walk);
    }

    /** The chain of {@code label} when the request keys it and did not opt out; else null. */
    PrefixChain chainFor(KVReqConfig cfg, String label) {
        if (!cfg.prefixCache() || cfg.prefixKeys() == null) {
            return null;
        }
        List<byte[]> keys = cfg.prefixKeys().get(label);
        if (keys == null || keys.isEmpty()) {
            return null;
        }
        int[] tail = cfg.prefixTail() == null ? null : cfg.prefixTail().get(label);
        return new PrefixChain(pageSize, root, cfg.prefixSeeds().getOrDefault(label, PrefixKeys.NO_PREV), keys, tail);
    }

    /** Pages the index holds for the chain's leading keys, at most {@code maxPages} (stamps them). */
    List<Integer> match(PrefixChain chain, int maxPages) {
        return index.lookup(chain.rootedKeys(), maxPages);
    }

    /**
     * Offer the stream's newly filled pages after a commit of {@code span} tokens. Only while the chain
     * still describes the stream (nothing released, and the step started within what the chain
     * covers); a retention stream offers only its protected head.
     */
    /**
     * Offer the pages a retrieval just filled (PD disaggregation): they hold the tokens the chain keys, so a
     * later pull of the same prefix takes them locally instead of copying them again.
     */
    void indexRetrieved(CacheStream s) {
        if (s.chain != null) {
            indexCommitted(s, s.storedLen - s.chain.cursor() * pageSize);
        }
    }

    void indexCommitted(CacheStream s, int span) {
        PrefixChain chain = s.chain;
        if (chain == null || s.released > 0 || s.storedLen - span > chain.coveredLen()) {
            return;
        }
        int filled = Math.min(s.storedLen / pageSize, chain.keyedPages());
        if (s.retention != null) {
            filled = Math.min(filled, (s.protectedPrefix == null ? 0 : s.protectedPrefix) / pageSize);
        }
        List<byte[]> keys = chain.rootedKeys();
        for (int i = chain.cursor(); i < filled; i++) {
            index.insert(keys.get(i), s.pages.get(i), i == 0 ? null : keys.get(i - 1));
        }
        chain.setCursor(Math.max(chain.cursor(), filled));
    }
}
