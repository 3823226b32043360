package org.mstar.engine;

/** Receives the logits a request's token number {@code index} is sampled from (tests compare them). */
@FunctionalInterface
interface LogitsObserver {
    void onLogits(String requestId, int index, float[] logits);
}
