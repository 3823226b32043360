package org.mstar.engine;

/** A request that completed: all its generated ids, the full text, why it stopped, usage and timings. */
public record FinishedRequest(String requestId, int[] tokenIds, String text, FinishReason finish, int promptTokens,
                              int cachedPromptTokens, RequestTimings timings) {}
