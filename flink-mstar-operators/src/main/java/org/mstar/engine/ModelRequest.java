package org.mstar.engine;

/**
 * A runner's own part of one request, for a model whose request is more than one prompt followed by generated
 * tokens ({@link ModelRunner#openRequest}): it runs as a series of sequences (Whisper: one per 30-second window),
 * each a prompt the model composes, then tokens drawn or replayed. The core keeps the output, the KV, the
 * scheduling and the events; the request says what its current sequence is, what the row that feeds its last
 * token yields, which tokens the next draw may not take, and when a sequence or the request ends.
 *
 * <p>A new sequence starts from no KV: the core frees the request's resources and feeds the sequence from its
 * first token, which is also how a preempted or reset request recomputes the one it was in.
 */
public interface ModelRequest {

    /** What the row that feeds a sequence's last token yields. */
    enum Yield {
        /** A drawn token. */
        TOKEN,
        /** Its logits, for the request to read on the host ({@link #takeLogits}); nothing is drawn. */
        LOGITS,
        /** Nothing: the sequence is complete (its tokens were known), and it ends ({@link #endSequence}). */
        NOTHING
    }

    /** Tokens of the current sequence: its prompt, then the tokens drawn or replayed in it. */
    int length();

    int tokenAt(int i);

    /** Tokens of the current sequence's prompt: the prompt a finished request reports. */
    int promptLength();

    /** The tokens drawn or replayed in the current sequence after its prompt, as the sampler has accepted them. */
    int[] sequenceGenerated();

    /** Tokens no draw of this request may take. */
    int[] suppressed();

    /** What the row that feeds the current sequence's last token yields. */
    Yield yieldAtEnd();

    /** Whether {@link #suppressNext} reads the logits of the row it draws from. */
    boolean readsLogits();

    /**
     * Tokens the next draw may not take, on top of {@link #suppressed}.
     *
     * @param logits the row's raw logits when {@link #readsLogits}, else null; the request may overwrite them
     */
    int[] suppressNext(float[] logits);

    /**
     * The logits of a {@link Yield#LOGITS} row; the sequence goes on (its prompt may grow). Returns the tokens
     * that are now known to follow (replayed from an earlier run): output, never drawn again.
     */
    int[] takeLogits(float[] logits);

    /**
     * Append the drawn {@code token}, the request's {@code generated}-th output token: why the request finishes
     * with it, or null when it goes on.
     */
    FinishReason accept(int token, int generated);

    /** Whether the current sequence can take no more tokens. */
    boolean sequenceEnded();

    /** Once the current sequence ended: why the request finishes with it, or null when another sequence follows. */
    FinishReason endSequence();

    /**
     * Start the next sequence (the first one when the request opens). Returns the tokens known to follow its
     * prompt (replayed from an earlier run): output, never drawn again.
     */
    int[] nextSequence();
}
