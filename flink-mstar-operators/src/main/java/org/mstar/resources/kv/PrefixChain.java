package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * The prefix-cache keys of one stream: one per page, as the preprocess worker computed them for the
 * prompt, extended with keys of pages that generated tokens fill.
 *
 * <p>When the prompt ends inside a page its last key names that partial page (it is never indexed);
 * the tokens past the last whole page are {@code unkeyed}, followed by sampled ids as they arrive. The
 * first time those fill the page, the partial key is replaced by the whole page's key.
 *
 * <p>Keys are kept both as given and re-rooted under the process root (what the index stores). The first page's key
 * follows the chain's seed ({@link PrefixKeys#NO_PREV} unless the request's KV depends on more than its tokens).
 */
final class PrefixChain {
    private final int pageSize;
    private final byte[] root;
    /** The key the stream's first page follows. */
    private final byte[] seed;
    private final List<byte[]> keys = new ArrayList<>();
    private final List<byte[]> rootedKeys = new ArrayList<>();
    private boolean partial;
    private int[] unkeyed;
    private int unkeyedLen;
    /** How many of the stream's leading pages the index already holds (or refused as duplicates). */
    private int cursor;

    PrefixChain(int pageSize, byte[] root, byte[] seed, List<byte[]> promptKeys, int[] tail) {
        this.pageSize = pageSize;
        this.root = root;
        this.seed = seed;
        for (byte[] k : promptKeys) {
            add(k);
        }
        this.unkeyed = tail == null ? new int[0] : tail.clone();
        this.unkeyedLen = unkeyed.length;
        this.partial = unkeyedLen > 0;
        if (partial && keys.isEmpty()) {
            throw new IllegalArgumentException("a prefix tail needs the key of its partial page");
        }
        if (unkeyedLen >= pageSize) {
            throw new IllegalArgumentException("a prefix tail holds less than a page, got " + unkeyedLen + " tokens");
        }
    }

    private void add(byte[] key) {
        keys.add(key);
        rootedKeys.add(PrefixKeys.rooted(root, key));
    }

    /** All keys, the partial one included, re-rooted. */
    List<byte[]> rootedKeys() {
        return Collections.unmodifiableList(rootedKeys);
    }

    int totalKeys() {
        return keys.size();
    }

    /** Keys of whole pages. */
    int keyedPages() {
        return keys.size() - (partial ? 1 : 0);
    }

    /** Tokens this chain describes: whole keyed pages plus the unkeyed tail. */
    int coveredLen() {
        return keyedPages() * pageSize + unkeyedLen;
    }

    int cursor() {
        return cursor;
    }

    void setCursor(int cursor) {
        this.cursor = cursor;
    }

    /** Take generated tokens; every page they complete gets its key. */
    void extend(int[] tokens) {
        if (unkeyedLen + tokens.length > unkeyed.length) {
            unkeyed = Arrays.copyOf(unkeyed, Math.max(unkeyed.length * 2, unkeyedLen + tokens.length));
        }
        System.arraycopy(tokens, 0, unkeyed, unkeyedLen, tokens.length);
        unkeyedLen += tokens.length;
        int at = 0;
        while (unkeyedLen - at >= pageSize) {
            int whole = keyedPages();
            byte[] prev = whole == 0 ? seed : keys.get(whole - 1);
            byte[] key = PrefixKeys.pageKey(prev, Arrays.copyOfRange(unkeyed, at, at + pageSize), List.of());
            if (partial) {
                keys.remove(keys.size() - 1);
                rootedKeys.remove(rootedKeys.size() - 1);
                partial = false;
            }
            add(key);
            at += pageSize;
        }
        if (at > 0) {
            System.arraycopy(unkeyed, at, unkeyed, 0, unkeyedLen - at);
            unkeyedLen -= at;
        }
    }
}
