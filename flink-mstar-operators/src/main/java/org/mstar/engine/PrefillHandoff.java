package org.mstar.engine;

import java.util.Map;
import org.mstar.resources.kv.KvPagePayload;

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
 * @param kv per KV stream label: what the prefill side stored
 * @param positions per position label: the next position to assign
 */
public record PrefillHandoff(String requestId, int[] prompt, int[] generated, Map<String, KvStream> kv,
                             Map<String, Integer> positions) {
    public PrefillHandoff {
        prompt = prompt.clone();
        generated = generated.clone();
        kv = Map.copyOf(kv);
        positions = Map.copyOf(positions);
    }

    /**
     * One KV stream.
     *
     * @param seqLen tokens stored
     * @param resetGeneration the producer stream's content epoch
     * @param pages the contents of the {@code ceil(seqLen / pageSize)} pages holding them, in sequence order
     */
    public record KvStream(int seqLen, long resetGeneration, KvPagePayload pages) {
        public KvStream {
            if (pages.startToken() != 0 || pages.endToken() != seqLen) {
                throw new IllegalArgumentException("hand-off pages carry tokens [" + pages.startToken() + ", "
                        + pages.endToken() + "), not [0, " + seqLen + ")");
            }
        }
    }

    /** Bytes of KV page contents carried. */
    public long kvBytes() {
        return kv.values().stream().mapToLong(s -> s.pages().data().length).sum();
    }
}
