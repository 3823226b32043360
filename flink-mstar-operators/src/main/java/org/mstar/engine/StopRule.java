package org.mstar.engine;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * When a request is done after a new token: a stop id (the model's EOS unless {@code ignoreEos}, or
 * one of the request's stop ids) once {@code minTokens} are out, else {@code maxTokens} generated or
 * the context full.
 */
final class StopRule {
    private final Set<Integer> eos;
    private final int maxSeqLen;

    StopRule(List<Integer> eosIds, int maxSeqLen) {
        this.eos = Set.copyOf(eosIds);
        this.maxSeqLen = maxSeqLen;
    }

    /** Every id the sampler must hold back until {@code minTokens}: EOS and the request's stop ids. */
    int[] stopIds(GenerationRequest r) {
        Set<Integer> ids = new HashSet<>(r.stopTokenIds());
        if (!r.ignoreEos()) {
            ids.addAll(eos);
        }
        return ids.stream().mapToInt(Integer::intValue).sorted().toArray();
    }

    /** Whether {@code r}'s next token, whatever it is, ends it by length (known before it is drawn). */
    boolean nextTokenEndsByLength(LiveRequest r) {
        return r.generated.size() + 1 >= r.request.maxTokens() || r.totalTokens() + 1 >= maxSeqLen;
    }

    FinishReason check(LiveRequest r, int token) {
        GenerationRequest req = r.request;
        int generated = r.generated.size();
        boolean stopId = req.stopTokenIds().contains(token) || (!req.ignoreEos() && eos.contains(token));
        if (stopId && generated >= req.minTokens()) {
            return FinishReason.STOP;
        }
        if (generated >= req.maxTokens() || r.totalTokens() >= maxSeqLen) {
            return FinishReason.LENGTH;
        }
        return null;
    }
}
