package org.mstar.engine.whisper;

import java.io.Serializable;

/**
 * Sizes of a {@link WhisperEngine}: requests decoded together, the KV pool (pages of {@code pageSize} tokens) and
 * the tokens one 30-second window may generate ({@code maxWindowTokens}; 0: until the decoder's last position, as
 * transformers' {@code max_new_tokens} per segment of long-form audio). Each admitted request holds the pages of a
 * whole window: its 1500-frame context and every decoder position. Serializable: engine factories carry it to the
 * TaskManagers.
 */
public record WhisperEngineOptions(int maxBatchRows, int pages, int pageSize, int maxWindowTokens)
        implements Serializable {
    public WhisperEngineOptions {
        if (maxBatchRows < 1 || pages < 2 || pageSize < 1 || maxWindowTokens < 0) {
            throw new IllegalArgumentException("max batch rows >= 1, pages >= 2, page size >= 1 and max window tokens"
                    + " >= 0, got " + maxBatchRows + ", " + pages + ", " + pageSize + ", " + maxWindowTokens);
        }
    }

    /** Windows generate until their end token or the decoder's last position. */
    public WhisperEngineOptions(int maxBatchRows, int pages, int pageSize) {
        this(maxBatchRows, pages, pageSize, 0);
    }
}
