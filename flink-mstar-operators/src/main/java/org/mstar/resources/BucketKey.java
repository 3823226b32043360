package org.mstar.resources;

/** Identifies one captured accelerator graph: walk, padded batch size and token count. */
public record BucketKey(String graphWalk, int bs, int numTokens, Object cgKeyInfo) {
    public BucketKey(String graphWalk, int bs, int numTokens) {
        this(graphWalk, bs, numTokens, null);
    }

    /** A decode bucket has one token per row. */
    public boolean isDecode() {
        return bs == numTokens;
    }
}
