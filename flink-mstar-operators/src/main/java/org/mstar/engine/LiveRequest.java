package org.mstar.engine;

import org.mstar.model.tokenizer.IncrementalDetokenizer;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * The engine's view of one request it is serving. Its token sequence is prompt ++ generated;
 * {@code computed} of those have their KV resident, so the next step feeds
 * {@code tokens[computed ..]} — the same rule covers a fresh prefill, a chunked prefill, a decode,
 * a recompute after preemption and a resume after a Flink restore.
 */
final class LiveRequest {
    final GenerationRequest request;
    final int[] prompt;
    final IntArrayList generated;
    final long arrivalNanos;
    /**
     * The runner's part of a request that runs as a series of sequences, each its own prompt and tokens (then
     * {@link #prompt} is empty and the sequence is the program's); null for one prompt followed by the generated
     * tokens.
     */
    final ModelRequest program;
    RequestStatus status = RequestStatus.WAITING;
    int computed;
    int cachedPromptTokens;
    long lastActiveStep = -1;
    long firstScheduledNanos = -1;
    long firstTokenNanos = -1;
    long lastTokenNanos = -1;
    long interTokenNanosSum;
    /** Tokens generated in this engine (resumed ones excluded), for the inter-token mean. */
    int tokensTimed;
    /** Whether the sampler's seen set already holds the prompt (it enters once, at the first step). */
    boolean promptTracked;
    /** Whether the prefix cache was asked about this (fresh) prompt. */
    boolean probed;
    /** Text deltas of the generated ids; null without a tokenizer. */
    IncrementalDetokenizer detokenizer;

    LiveRequest(GenerationRequest request, int[] prompt, int[] generated, long arrivalNanos) {
        this(request, prompt, generated, arrivalNanos, null);
    }

    /** A request of {@code program}'s sequences, which starts at its first one. */
    LiveRequest(GenerationRequest request, ModelRequest program, long arrivalNanos) {
        this(request, new int[0], program.nextSequence(), arrivalNanos, program);
    }

    private LiveRequest(GenerationRequest request, int[] prompt, int[] generated, long arrivalNanos,
                        ModelRequest program) {
        this.request = request;
        this.prompt = prompt;
        this.generated = new IntArrayList(generated);
        this.arrivalNanos = arrivalNanos;
        this.program = program;
    }

    String id() {
        return request.requestId();
    }

    /** Tokens of the sequence being fed. */
    int totalTokens() {
        return program != null ? program.length() : prompt.length + generated.size();
    }

    int tokenAt(int i) {
        if (program != null) {
            return program.tokenAt(i);
        }
        return i < prompt.length ? prompt[i] : generated.get(i - prompt.length);
    }

    /** What the row that feeds the sequence's last token yields. */
    ModelRequest.Yield yieldAtEnd() {
        return program == null ? ModelRequest.Yield.TOKEN : program.yieldAtEnd();
    }

    /** Tokens still to feed before the next sample. */
    int pending() {
        return totalTokens() - computed;
    }

    /** Output tokens the program knows without drawing them (replayed from an earlier run): no events. */
    void addKnown(int[] tokens) {
        for (int token : tokens) {
            generated.add(token);
            if (detokenizer != null) {
                detokenizer.push(token);
            }
        }
    }

    /** Follow the generated ids as text with {@code tokenizer} (null: no text, deltas stay empty). */
    void detokenizeWith(TextTokenizer tokenizer) {
        if (tokenizer != null) {
            detokenizer = tokenizer.detokenizer(prompt);
            for (int i = 0; i < generated.size(); i++) {
                detokenizer.push(generated.get(i));
            }
        }
    }

    /** The event of the token just generated, {@code token}, with its text delta (and the rest of the text at the end). */
    TokenOutput output(int token, FinishReason finish) {
        String delta = detokenizer == null ? "" : detokenizer.push(token);
        if (finish != null && detokenizer != null) {
            delta += detokenizer.finish();
        }
        return new TokenOutput(id(), generated.size() - 1, token, delta, finish);
    }

    /** The result of this request, finished for {@code finish}; text decoded with {@code tokenizer} (null: none). */
    FinishedRequest finished(FinishReason finish, TextTokenizer tokenizer) {
        int[] ids = generated.toArray();
        String text = tokenizer == null ? "" : tokenizer.decode(ids);
        int promptTokens = program == null ? prompt.length : program.promptLength();
        return new FinishedRequest(id(), ids, text, finish, promptTokens, cachedPromptTokens, timings());
    }

    /** Time the token generated at {@code now}: the first one, or one more inter-token gap. */
    void recordToken(long now) {
        if (firstTokenNanos < 0) {
            firstTokenNanos = now;
        } else {
            interTokenNanosSum += now - lastTokenNanos;
            tokensTimed++;
        }
        lastTokenNanos = now;
    }

    /** Queueing, first-token, mean inter-token and total time so far. */
    RequestTimings timings() {
        long queue = firstScheduledNanos < 0 ? 0 : firstScheduledNanos - arrivalNanos;
        long ttft = firstTokenNanos < 0 ? 0 : firstTokenNanos - arrivalNanos;
        long itl = tokensTimed == 0 ? 0 : interTokenNanosSum / tokensTimed;
        return new RequestTimings(queue, ttft, itl, lastTokenNanos - arrivalNanos);
    }

    /** Back to no resident KV, as after a free-and-recompute preemption. */
    void dropKv() {
        computed = 0;
        probed = false;
        promptTracked = false;
        status = RequestStatus.WAITING;
    }
}
