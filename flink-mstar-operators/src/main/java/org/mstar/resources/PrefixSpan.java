package org.mstar.resources;

/**
 * One write to a keyed stream as the preprocess worker laid it out: {@code length} slots written,
 * {@code advance} position-counter movement, under {@code walk}.
 */
public record PrefixSpan(int length, int advance, String walk, boolean scratch, byte[] digest, Integer endKey) {
    public PrefixSpan {
        if (length < 0 || advance < 0) throw new IllegalArgumentException("length and advance must be >= 0");
    }

    public PrefixSpan(int length, int advance, String walk) {
        this(length, advance, walk, false, null, null);
    }
}
