package org.mstar.resources.constraint;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** Small vocabularies for constraint tests: the 256 single bytes, then some multi-byte tokens, and end ids. */
final class TestVocabularies {
    private TestVocabularies() {}

    /**
     * Ids 0..{@code eosCount-1} are end ids, then the 256 bytes, then {@code words} in order.
     */
    static TokenVocabulary bytesAnd(List<String> words, int eosCount) {
        List<byte[]> bytes = new ArrayList<>();
        List<Integer> eos = new ArrayList<>();
        for (int i = 0; i < eosCount; i++) {
            bytes.add(null);
            eos.add(i);
        }
        for (int b = 0; b < 256; b++) {
            bytes.add(new byte[] {(byte) b});
        }
        for (String w : words) {
            bytes.add(w.getBytes(StandardCharsets.UTF_8));
        }
        return new TokenVocabulary(bytes.toArray(new byte[0][]), eos);
    }

    /** The allowed tokens of {@code state} that are valid UTF-8 on their own, as text; "<eos>" for end ids. */
    static List<String> allowedTexts(TokenAutomaton a, int state, TokenVocabulary v) {
        List<String> out = new ArrayList<>();
        int[] mask = a.mask(state);
        for (int id = 0; id < v.size(); id++) {
            if ((mask[id >>> 5] >>> (id & 31) & 1) != 0) {
                byte[] b = v.bytes(id);
                if (b == null) {
                    out.add("<eos>");
                } else {
                    String s = new String(b, StandardCharsets.UTF_8);
                    if (!s.contains("\uFFFD")) {
                        out.add(s);
                    }
                }
            }
        }
        return out;
    }

    static boolean allowed(TokenAutomaton a, int state, int id) {
        return (a.mask(state)[id >>> 5] >>> (id & 31) & 1) != 0;
    }
}
