package org.mstar.engine;

/**
 * Receives the F32 logits a request's generated token number {@code index} is drawn from. For checks and
 * harnesses (engine vs a reference, one device vs another): while one is set, every step copies its
 * logits to the host.
 */
@FunctionalInterface
public interface LogitsObserver {
    void onLogits(String requestId, int index, float[] logits);
}
