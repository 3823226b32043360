package org.mstar.engine;

/** Why a request stopped, with the names serving users know. */
public enum FinishReason {
    /** An end-of-sequence id or one of the request's stop ids was generated. */
    STOP,
    /** {@code maxTokens} were generated, or the model's context is full. */
    LENGTH,
    /** The request failed; its error event says why. */
    ERROR;

    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
