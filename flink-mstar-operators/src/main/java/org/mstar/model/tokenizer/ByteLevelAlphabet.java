package org.mstar.model.tokenizer;

/**
 * The byte-to-character table of byte-level BPE (GPT-2's {@code bytes_to_unicode}): printable Latin-1 bytes
 * stand for themselves and the other 68 bytes for the characters from U+0100 on, in byte order, so every
 * token is printable text without spaces (a space byte becomes 'Ġ').
 */
final class ByteLevelAlphabet {
    private static final char[] CHARS = new char[256];

    static {
        int extra = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            CHARS[b] = printable ? (char) b : (char) (256 + extra++);
        }
    }

    private ByteLevelAlphabet() {}

    static char charOf(int b) {
        return CHARS[b & 0xFF];
    }

    /** One single-character symbol per byte. */
    static String[] encode(byte[] bytes) {
        String[] out = new String[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            out[i] = String.valueOf(charOf(bytes[i]));
        }
        return out;
    }
}
