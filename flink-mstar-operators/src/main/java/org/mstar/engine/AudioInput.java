package org.mstar.engine;

/**
 * Speech for a speech-to-text model: mono samples at 16 kHz in [-1, 1], any length (long audio is decoded in
 * 30-second windows). {@code language} is an ISO 639-1 code ("en", "de", ...) or null to let the model detect it;
 * {@code task} is "transcribe" or "translate" (into English); {@code timestamps} asks for timestamp tokens in the
 * output.
 */
public record AudioInput(float[] samples, String language, String task, boolean timestamps) {
    public static final int SAMPLE_RATE = 16_000;
}
