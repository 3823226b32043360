package org.mstar.flink;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.locks.LockSupport;
import org.mstar.engine.AudioInput;
import org.mstar.engine.EngineStats;
import org.mstar.engine.FinishReason;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.RequestTimings;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.resources.RequestValidationException;

/**
 * A deterministic stand-in for the model engine. Token {@code i} of a request is a hash of (seed, prompt, i), so
 * it does not depend on batching, and {@link #resume} continues exactly where a lost run would have. Each step
 * admits waiting requests up to {@code maxRunning} and gives every running request one token; a request stops
 * at its max_tokens, at the end of the context, on a stop id, or on {@link #EOS} (about one token in 23 unless
 * ignore_eos). Text prompts are tokenised per word; audio becomes one token hashed from its samples. A step can be given simulated device time.
 */
public final class FakeEngine implements GenerationEngine {
    public static final int EOS = 2;
    static final int VOCAB = 1000;

    private final int maxRunning;
    private final int contextLength;
    private final long stepNanos;

    private final PriorityQueue<Sequence> waiting = new PriorityQueue<>(
            Comparator.comparingInt((Sequence s) -> -s.request.priority()).thenComparingLong(s -> s.order));
    private final Map<String, Sequence> running = new LinkedHashMap<>();
    private final Map<String, Sequence> live = new HashMap<>();
    private long order;
    private long promptTokens;
    private long generatedTokens;
    private boolean closed;

    /**
     * @param maxRunning requests generating at once; the others wait
     * @param contextLength prompt + generated tokens a request may reach
     * @param stepNanos simulated device time of a step
     */
    public FakeEngine(int maxRunning, int contextLength, long stepNanos) {
        this.maxRunning = maxRunning;
        this.contextLength = contextLength;
        this.stepNanos = stepNanos;
    }

    @Override
    public void submit(GenerationRequest request) {
        resume(request, new int[0]);
    }

    @Override
    public void resume(GenerationRequest request, int[] generated) {
        check(!closed, "engine is closed");
        request.sampling().validate(null);
        for (int stop : request.stopTokenIds()) {
            if (stop >= VOCAB) {
                throw new RequestValidationException("stop_token_ids", "id " + stop + " is outside the vocabulary of " + VOCAB);
            }
        }
        if (live.containsKey(request.requestId())) {
            return;
        }
        int[] prompt = request.audio() != null ? listen(request.audio())
                : request.promptTokenIds() != null ? request.promptTokenIds() : tokenize(request.promptText());
        if (prompt.length == 0) {
            throw new RequestValidationException("prompt", "has no tokens");
        }
        if (prompt.length >= contextLength) {
            throw new RequestValidationException("prompt", prompt.length + " tokens leave no room in the context of "
                    + contextLength);
        }
        for (int id : prompt) {
            if (id >= VOCAB) {
                throw new RequestValidationException("prompt_token_ids", "id " + id + " is outside the vocabulary of " + VOCAB);
            }
        }
        Sequence s = new Sequence(request, prompt, generated, order++);
        live.put(request.requestId(), s);
        waiting.add(s);
    }

    @Override
    public StepResult step() {
        check(!closed, "engine is closed");
        while (running.size() < maxRunning && !waiting.isEmpty()) {
            Sequence s = waiting.poll();
            s.firstScheduledNanos = System.nanoTime();
            promptTokens += s.prompt.length;
            running.put(s.request.requestId(), s);
        }
        if (running.isEmpty()) {
            return StepResult.EMPTY;
        }
        if (stepNanos > 0) {
            LockSupport.parkNanos(stepNanos); // simulated forward pass
        }
        List<TokenOutput> tokens = new ArrayList<>();
        List<FinishedRequest> finished = new ArrayList<>();
        for (Iterator<Sequence> it = running.values().iterator(); it.hasNext(); ) {
            Sequence s = it.next();
            int index = s.generated.size();
            int id = tokenAt(s.request, s.promptHash, index);
            s.append(id, System.nanoTime());
            FinishReason finish = finishReason(s, id, index);
            tokens.add(new TokenOutput(s.request.requestId(), index, id, textOf(id), finish));
            if (finish != null) {
                it.remove();
                live.remove(s.request.requestId());
                finished.add(s.finished(finish));
            }
        }
        generatedTokens += tokens.size();
        return new StepResult(tokens, finished, List.of());
    }

    @Override
    public boolean hasWork() {
        return !live.isEmpty();
    }

    @Override
    public void remove(String requestId) {
        Sequence s = live.remove(requestId);
        if (s != null) {
            waiting.remove(s);
            running.remove(requestId);
        }
    }

    @Override
    public int waiting() {
        return waiting.size();
    }

    @Override
    public int maxBatchRows() {
        return maxRunning;
    }

    @Override
    public EngineStats stats() {
        return new EngineStats(running.size(), waiting.size(), running.size(), maxRunning, 0, promptTokens,
                generatedTokens, 0);
    }

    @Override
    public void close() {
        closed = true;
    }

    /** The complete output of one request, generated alone: the oracle for any batched or restored run. */
    public static List<TokenOutput> reference(GenerationRequest request, int contextLength) {
        FakeEngine engine = new FakeEngine(1, contextLength, 0);
        engine.submit(request);
        List<TokenOutput> out = new ArrayList<>();
        while (engine.hasWork()) {
            out.addAll(engine.step().tokens());
        }
        return out;
    }

    static String textOf(int id) {
        return id == EOS ? "" : "t" + id + " ";
    }

    /** Speech as a one-token prompt that depends on every sample, so the tokens show what audio arrived. */
    static int[] listen(AudioInput audio) {
        return new int[] {3 + Math.floorMod(Arrays.hashCode(audio.samples()), VOCAB - 3)};
    }

    static int[] tokenize(String text) {
        String trimmed = text.trim();
        if (trimmed.isEmpty()) {
            return new int[0];
        }
        return Arrays.stream(trimmed.split("\\s+")).mapToInt(w -> 3 + Math.floorMod(w.hashCode(), VOCAB - 3)).toArray();
    }

    private FinishReason finishReason(Sequence s, int id, int index) {
        boolean stopAllowed = index + 1 > s.request.minTokens();
        if (stopAllowed && (id == EOS || s.request.stopTokenIds().contains(id))) {
            return FinishReason.STOP;
        }
        if (index + 1 >= s.request.maxTokens() || s.prompt.length + index + 1 >= contextLength) {
            return FinishReason.LENGTH;
        }
        return null;
    }

    private static int tokenAt(GenerationRequest r, long promptHash, int index) {
        long seed = r.sampling().greedyDecoding() ? 0 : r.sampling().seed();
        long h = mix(mix(seed ^ promptHash) + index);
        boolean eosAllowed = !r.ignoreEos() && index >= r.minTokens();
        if (eosAllowed && Math.floorMod(h, 23) == 0) {
            return EOS;
        }
        return 3 + (int) Math.floorMod(h >>> 8, VOCAB - 3);
    }

    private static long mix(long z) { // splitmix64 finaliser
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    private static void check(boolean condition, String message) {
        if (!condition) {
            throw new IllegalStateException(message);
        }
    }

    private static final class Sequence {
        final GenerationRequest request;
        final int[] prompt;
        final long promptHash;
        final List<Integer> generated = new ArrayList<>();
        final long order;
        final long arrivalNanos = System.nanoTime();
        long firstScheduledNanos;
        long firstTokenNanos;
        long lastTokenNanos;

        Sequence(GenerationRequest request, int[] prompt, int[] generated, long order) {
            this.request = request;
            this.prompt = prompt;
            this.promptHash = Arrays.hashCode(prompt) * 0x9e3779b97f4a7c15L;
            for (int id : generated) {
                this.generated.add(id);
            }
            this.order = order;
        }

        void append(int id, long now) {
            if (firstTokenNanos == 0) {
                firstTokenNanos = now;
            }
            lastTokenNanos = now;
            generated.add(id);
        }

        FinishedRequest finished(FinishReason finish) {
            int[] ids = generated.stream().mapToInt(Integer::intValue).toArray();
            StringBuilder text = new StringBuilder();
            for (int id : ids) {
                text.append(textOf(id));
            }
            int n = ids.length;
            long itl = n > 1 ? (lastTokenNanos - firstTokenNanos) / (n - 1) : 0;
            RequestTimings timings = new RequestTimings(firstScheduledNanos - arrivalNanos,
                    firstTokenNanos - arrivalNanos, itl, lastTokenNanos - arrivalNanos);
            return new FinishedRequest(request.requestId(), ids, text.toString(), finish, prompt.length, 0, timings);
        }
    }
}
