package org.mstar.resources.constraint;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

/**
 * A model's vocabulary as constrained decoding sees it: the bytes each token id stands for (null for ids that are
 * never text: special and unused ids), and the end-of-sequence ids, allowed exactly where the output may end.
 *
 * <p>Kept once per tokenizer: the ids sorted by their bytes with each one's common prefix with the one before,
 * which lets {@link TokenAutomaton} walk all tokens sharing a prefix through the byte automaton once.
 */
public final class TokenVocabulary {
    private final byte[][] bytes;
    private final int[] eosIds;
    /** Text token ids in byte order. */
    private final int[] sorted;
    /** {@code lcp[i]}: bytes {@code sorted[i]} shares with {@code sorted[i - 1]} (0 for i = 0). */
    private final int[] lcp;
    private final String fingerprint;

    /**
     * @param bytes  per id, its bytes; null for an id that is never generated as text
     * @param eosIds the end ids (inside the vocabulary)
     */
    public TokenVocabulary(byte[][] bytes, List<Integer> eosIds) {
        this.bytes = bytes.clone();
        this.eosIds = eosIds.stream().mapToInt(Integer::intValue).distinct().sorted().toArray();
        for (int id : this.eosIds) {
            if (id < 0 || id >= bytes.length) {
                throw new IllegalArgumentException("eos id " + id + " outside the vocabulary of " + bytes.length);
            }
            this.bytes[id] = null;
        }
        this.sorted = java.util.stream.IntStream.range(0, bytes.length)
                .filter(i -> this.bytes[i] != null && this.bytes[i].length > 0).boxed()
                .sorted((a, b) -> Arrays.compareUnsigned(this.bytes[a], this.bytes[b]))
                .mapToInt(Integer::intValue).toArray();
        this.lcp = new int[sorted.length];
        for (int i = 1; i < sorted.length; i++) {
            byte[] a = this.bytes[sorted[i - 1]];
            byte[] b = this.bytes[sorted[i]];
            int m = Arrays.mismatch(a, b);
            lcp[i] = m < 0 ? a.length : m;
        }
        this.fingerprint = digest(this.bytes, this.eosIds);
    }

    /** Token ids, text or not. */
    public int size() {
        return bytes.length;
    }

    /** The bytes of {@code id}, or null when it is not text. */
    public byte[] bytes(int id) {
        return bytes[id];
    }

    int[] eosIds() {
        return eosIds;
    }

    int[] sorted() {
        return sorted;
    }

    int[] lcp() {
        return lcp;
    }

    /** SHA-256 over every token's bytes and the end ids: equal vocabularies share compiled constraints. */
    public String fingerprint() {
        return fingerprint;
    }

    private static String digest(byte[][] bytes, int[] eos) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            for (byte[] b : bytes) {
                if (b == null) {
                    md.update((byte) 0xFF);
                } else {
                    md.update((byte) 0);
                    md.update(intBytes(b.length));
                    md.update(b);
                }
            }
            for (int e : eos) {
                md.update(intBytes(e));
            }
            return HexFormat.of().formatHex(md.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK provides SHA-256", e);
        }
    }

    private static byte[] intBytes(int v) {
        return new byte[] {(byte) (v >>> 24), (byte) (v >>> 16), (byte) (v >>> 8), (byte) v};
    }
}
