package org.mstar.model.tokenizer;

import java.util.Arrays;

/**
 * Turns streamed token ids into text deltas. One token can end inside a UTF-8 character (byte-level
 * tokens) and a token's text can depend on its neighbour (a leading space), so each delta is the difference
 * between decoding a short window of recent ids with and without the new ones. A delta is held back while
 * the window's text ends in U+FFFD, which is how an incomplete UTF-8 sequence decodes.
 *
 * <p>The deltas of {@link #push} followed by {@link #finish()} concatenate to the decode of all pushed ids
 * (for a detokenizer made with prompt context: to the text those ids add after the prompt). Memory stays
 * bounded: ids before the window are dropped. One instance per sequence, one thread.
 */
public final class IncrementalDetokenizer {
    /** Prompt tokens kept as context; a few cover any leading-space or multi-byte dependency. */
    private static final int CONTEXT_TOKENS = 5;
    private static final String REPLACEMENT = "\uFFFD";

    private final TextTokenizer tokenizer;
    private int[] ids;
    private int size;
    /** Window start: the ids in [prefixOffset, readOffset) were emitted already and give context. */
    private int prefixOffset;
    /** First id whose text has not been emitted. */
    private int readOffset;

    IncrementalDetokenizer(TextTokenizer tokenizer, int[] contextIds) {
        this.tokenizer = tokenizer;
        int keep = Math.min(CONTEXT_TOKENS, contextIds.length);
        this.ids = Arrays.copyOfRange(contextIds, contextIds.length - keep, contextIds.length + 16);
        this.size = keep;
        this.readOffset = keep;
    }

    /** Adds one generated id and returns the text it completes; "" while the text is held back. */
    public String push(int id) {
        if (size == ids.length) {
            ids = Arrays.copyOf(ids, size * 2);
        }
        ids[size++] = id;
        String emitted = tokenizer.decode(ids, prefixOffset, readOffset);
        String window = tokenizer.decode(ids, prefixOffset, size);
        if (window.length() <= emitted.length() || window.endsWith(REPLACEMENT)) {
            return "";
        }
        advance();
        return window.substring(emitted.length());
    }

    /**
     * The text still held back at the end of the stream (an incomplete UTF-8 tail decodes to U+FFFD here);
     * "" when nothing is held.
     */
    public String finish() {
        String emitted = tokenizer.decode(ids, prefixOffset, readOffset);
        String window = tokenizer.decode(ids, prefixOffset, size);
        advance();
        return window.length() > emitted.length() ? window.substring(emitted.length()) : "";
    }

    /** The ids read so far become the context of the next window; ids before it are no longer needed. */
    private void advance() {
        int start = readOffset;
        System.arraycopy(ids, start, ids, 0, size - start);
        size -= start;
        prefixOffset = 0;
        readOffset = size;
    }
}
