package org.mstar.engine;

/**
 * What part of a request's life an engine serves.
 * <ul>
 *   <li>{@link #COLOCATED}: the whole of it, prompt and every generated token.
 *   <li>{@link #PREFILL}: the prompt (chunked, through its prefix cache) and the first token; then it publishes the
 *       request's KV pages, positions and sampling progress as a {@link PrefillHandoff} in the step result and
 *       frees the request.
 *   <li>{@link #DECODE}: requests handed over by {@link GenerationEngine#receive}: it imports the KV (only the tail
 *       its own prefix cache lacks) and continues where the prefill stopped. It still serves whole requests too:
 *       {@link GenerationEngine#resume} recomputes one from prompt + generated tokens after a restore.
 * </ul>
 */
public enum EngineRole {
    COLOCATED,
    PREFILL,
    DECODE
}
