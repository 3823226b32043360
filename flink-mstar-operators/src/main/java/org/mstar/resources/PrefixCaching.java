package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A {@link Resource} that takes part in the prefix cache: it keeps state across requests under the cache's root,
 * or at least follows when a request skips the leading tokens the cache holds.
 */
public interface PrefixCaching {

    /** This resource's contribution to the prefix cache's root; null if it cannot affect stored pages. */
    default byte[] fingerprint() {
        return null;
    }

    /** Open whatever this resource keeps across requests, under {@code root}; true if anything opened. */
    default boolean enablePrefixCache(byte[] root, Set<String> walks) {
        return false;
    }

    /** How much of this walk's leading inputs this resource holds; null means "no opinion", not zero. */
    default CachedPrefix resolveCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs) {
        return null;
    }

    /**
     * The longest prefix of at most {@code tokens} (the smallest answer of {@link #resolveCachedPrefix}) this
     * resource can take on: a resource that keeps state only at some lengths answers the longest of those it holds.
     */
    default int fitCachedPrefix(String rid, String nodeName, String graphWalk, int tokens) {
        return tokens;
    }

    /** Take on the prefix every resource agreed to skip (null if none); {@code inputs} are untrimmed. */
    default void applyCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs,
                                   CachedPrefix prefix) {}

    /** The cache served this walk whole; it will never admit or commit. */
    default void completeCachedWalk(String rid, String nodeName, String graphWalk) {}

    /** Whether {@link #extendPrefixChain} can do anything now (a prefix cache is open). */
    default boolean keysPrefixChains() {
        return false;
    }

    /** Take this step's sampled tokens so generated pages can be keyed. */
    default void extendPrefixChain(String rid, String nodeName, String graphWalk, Map<String, int[]> outputs) {}

    /** On rank 0 of a TP node: lease the cached prefix as the step is sent; null when none. */
    default List<Integer> leaseCachedPrefix(String rid, String nodeName, String graphWalk) {
        return null;
    }

    /** On a follower: lease the pages rank 0 leased; false until this rank holds them. */
    default boolean adoptCachedPrefix(String rid, String nodeName, String graphWalk, List<Integer> pages,
                                      boolean caughtUp) {
        return true;
    }

    default void releaseCachedPrefix(String rid, String nodeName, String graphWalk) {}

    /** (allocation count, hash of the page sequence) for TP followers to check; null where none kept. */
    default long[] pageTrail() {
        return null;
    }
}
