package org.mstar.sql;

/**
 * A row the engine could not serve, with an HTTP-style code: 400 for input the model cannot take (no prompt, too
 * long for the context, a conversation without a chat template), 500 for the model's fault.
 */
final class RowFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;

    RowFailure(int code, String message) {
        super(message);
        this.code = code;
    }

    int code() {
        return code;
    }

    /** The message an error row carries: the code and the reason. */
    String describe() {
        return code + ": " + getMessage();
    }
}
