package org.mstar.model.whisper.audio;

/** Bytes that are not a WAV file this front end can read; the message says what is wrong. */
public final class WavFormatException extends Exception {
    public WavFormatException(String message) {
        super(message);
    }

    public WavFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
