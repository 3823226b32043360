package org.mstar.engine;

import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A finished prefill, as a {@link EngineRole#PREFILL} engine publishes it and a {@link EngineRole#DECODE} engine
 * takes it ({@link GenerationEngine#receive}): plain data, so it can travel in a record.
 *
 * <p>The sampler's state is not copied: it is a function of the request's sampling config, its prompt and the
 * tokens it generated (counter-based draws), so the decode side rebuilds it from {@code prompt} and
 * {@code generated}.
 *
 * @param requestId the request
 * @param prompt the prompt's token ids, as the prefill side tokenised it
 * @param generated tokens sampled on the prefill side (the first one)
 * @param states per resource key: what that resource published (its KV pages, its positions), as the bytes of the
 *               resource's codec ({@link ModelRunner#handoffCodecs()}); only the same resource on the decode side
 *               reads them. Each is a read-only view of the bytes it was given, from their position to their limit.
 */
public record PrefillHandoff(String requestId, int[] prompt, int[] generated, Map<String, ByteBuffer> states) {
    public PrefillHandoff {
        prompt = prompt.clone();
        generated = generated.clone();
        Map<String, ByteBuffer> views = new LinkedHashMap<>();
        states.forEach((key, bytes) -> views.put(key, bytes.slice().asReadOnlyBuffer()));
        states = Collections.unmodifiableMap(views);
    }

    /** Bytes of resource state carried. */
    public long stateBytes() {
        return states.values().stream().mapToLong(ByteBuffer::remaining).sum();
    }
}
