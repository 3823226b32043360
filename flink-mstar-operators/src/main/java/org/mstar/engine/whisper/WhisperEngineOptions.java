package org.mstar.engine.whisper;

import java.io.Serializable;

/**
 * Sizes of a Whisper engine: requests decoded together, the KV pool (pages of {@code pageSize} tokens), the
 * tokens one 30-second window may generate ({@code maxWindowTokens}; 0: until the decoder's last position, as
 * transformers' {@code max_new_tokens} per segment of long-form audio), and whether decode steps replay as device
 * graphs. A request holds the pages of its window's 1500-frame context and of its decoder tokens so far; the pool
 * must hold at least one whole window. Serializable: engine factories carry it to the TaskManagers.
 */
public record WhisperEngineOptions(int maxBatchRows, int pages, int pageSize, int maxWindowTokens,
                                   boolean decodeGraphs) implements Serializable {
    public WhisperEngineOptions {
        if (maxBatchRows < 1 || pages < 2 || pageSize < 1 || maxWindowTokens < 0) {
            throw new IllegalArgumentException("max batch rows >= 1, pages >= 2, page size >= 1 and max window tokens"
                    + " >= 0, got " + maxBatchRows + ", " + pages + ", " + pageSize + ", " + maxWindowTokens);
        }
    }

    /** Eager decode steps. */
    public WhisperEngineOptions(int maxBatchRows, int pages, int pageSize, int maxWindowTokens) {
        this(maxBatchRows, pages, pageSize, maxWindowTokens, false);
    }

    /** Windows generate until their end token or the decoder's last position; eager decode steps. */
    public WhisperEngineOptions(int maxBatchRows, int pages, int pageSize) {
        this(maxBatchRows, pages, pageSize, 0);
    }

    public WhisperEngineOptions withDecodeGraphs(boolean on) {
        return new WhisperEngineOptions(maxBatchRows, pages, pageSize, maxWindowTokens, on);
    }
}
