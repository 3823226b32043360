package org.mstar.device.cuda.harness;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.function.Consumer;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LogitsObserver;
import org.mstar.engine.PreplanCounts;
import org.mstar.engine.StepResult;

/**
 * What one engine produced for a batch of requests submitted together: each request's tokens and the logits
 * each token was drawn from, and the steps and wall time the batch took.
 */
final class EngineTranscript {
    final Map<String, int[]> tokens = new HashMap<>();
    final Map<String, List<float[]>> logits = new HashMap<>();
    int steps;
    double millis;
    long graphReplays;
    PreplanCounts preplan;
    long launchedAhead;

    /** Submits {@code requests}, steps {@code engine} until idle; fails on a request failure. */
    static EngineTranscript record(LlamaEngine engine, List<GenerationRequest> requests) {
        EngineTranscript t = record(engine, engine::observeLogits, requests);
        t.graphReplays = engine.decodeGraphReplays();
        t.preplan = engine.preplanCounts();
        t.launchedAhead = engine.launchedAhead();
        return t;
    }

    /** As above for any engine: {@code observe} hands the engine the observer of its logits (null takes it away). */
    static EngineTranscript record(GenerationEngine engine, Consumer<LogitsObserver> observe,
                                   List<GenerationRequest> requests) {
        EngineTranscript t = new EngineTranscript();
        observe.accept((rid, index, l) -> {
            List<float[]> seen = t.logits.computeIfAbsent(rid, k -> new ArrayList<>());
            if (index != seen.size()) {
                throw new IllegalStateException(rid + ": logits of token " + index + " after " + seen.size());
            }
            seen.add(l);
        });
        long start = System.nanoTime();
        requests.forEach(engine::submit);
        while (engine.hasWork()) {
            StepResult r = engine.step();
            t.steps++;
            if (!r.failures().isEmpty()) {
                throw new IllegalStateException("engine failed requests: " + r.failures());
            }
            for (FinishedRequest f : r.finished()) {
                t.tokens.put(f.requestId(), f.tokenIds());
            }
        }
        t.millis = (System.nanoTime() - start) / 1e6;
        observe.accept(null);
        return t;
    }

    /**
     * SHA-256 over every request's tokens and the bits of its logits, by request id: equal digests from two builds
     * on one machine mean bit-identical output.
     */
    String digest() {
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        TreeSet<String> ids = new TreeSet<>(tokens.keySet());
        ids.addAll(logits.keySet());
        for (String id : ids) {
            sha.update(id.getBytes(StandardCharsets.UTF_8));
            for (int token : tokens.getOrDefault(id, new int[0])) {
                sha.update(ByteBuffer.allocate(4).putInt(token).array());
            }
            for (float[] row : logits.getOrDefault(id, List.of())) {
                ByteBuffer b = ByteBuffer.allocate(4 * row.length);
                for (float v : row) {
                    b.putInt(Float.floatToRawIntBits(v));
                }
                sha.update(b.array());
            }
        }
        StringBuilder hex = new StringBuilder();
        for (byte x : sha.digest()) {
            hex.append(String.format(Locale.ROOT, "%02x", x));
        }
        return hex.toString();
    }
}
