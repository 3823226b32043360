package org.mstar.engine;

import java.util.List;
import org.mstar.model.chat.ChatMessage;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.constraint.OutputConstraint;

/**
 * One generation request as the engine takes it; build one with {@link #builder(String)}. Exactly one of
 * {@code promptTokenIds}, {@code promptText} and {@code messages} is set; text is tokenised by the engine, and
 * messages are first rendered by the model's chat template. {@code maxTokens} bounds generated tokens;
 * {@code minTokens} holds back EOS and stop ids until reached. The sampler's seed is in {@code sampling} (null: the
 * engine's defaults). {@code constraint}, when not null, is what the output must match (structured output).
 * {@code audio}, when not null, is speech for a speech-to-text model to transcribe; the prompt fields are then unset
 * (the model builds its own decoder prompt from the audio options). {@code adapter}, when not null, names the LoRA
 * adapter the request runs with (null: the base model).
 *
 * <p>The compact constructor is the one place that checks what a request can get wrong whatever model serves it
 * (token limits, an empty conversation), so the wire converter and every engine see a request that passed it; what
 * depends on the model (vocabulary, context length, chat template, text or audio) is the engine's to check.
 */
public record GenerationRequest(String requestId, int[] promptTokenIds, String promptText, SamplingReqConfig sampling,
                                int maxTokens, int minTokens, List<Integer> stopTokenIds, boolean ignoreEos,
                                int priority, OutputConstraint constraint, List<ChatMessage> messages,
                                AudioInput audio, String adapter) {
    /** @throws RequestValidationException naming the offending field */
    public GenerationRequest {
        if (maxTokens < 1) {
            throw new RequestValidationException("max_tokens", "must be >= 1, got " + maxTokens);
        }
        if (minTokens > maxTokens) {
            throw new RequestValidationException("min_tokens", "must be <= max_tokens (" + maxTokens + "), got "
                    + minTokens);
        }
        if (minTokens < 0) {
            throw new RequestValidationException("min_tokens", "must be in [0, max_tokens], got " + minTokens);
        }
        if (messages != null && messages.isEmpty()) {
            throw new RequestValidationException("messages", "must not be empty");
        }
        if (adapter != null && adapter.isBlank()) {
            throw new RequestValidationException("adapter", "must name an adapter, or be unset for the base model");
        }
        stopTokenIds = stopTokenIds == null ? List.of() : List.copyOf(stopTokenIds);
        messages = messages == null ? null : List.copyOf(messages);
    }

    /** A request named {@code requestId}; set its prompt (or messages or audio) and {@code maxTokens}. */
    public static Builder builder(String requestId) {
        return new Builder(requestId);
    }

    /**
     * Names each field of a request at its call site. Unset fields are absent (prompt, text, messages, audio,
     * constraint, sampling: the engine's defaults; adapter: the base model), empty (stop ids) or zero (min tokens,
     * priority); max tokens has no default, and {@link #build()} refuses a request that sets none.
     */
    public static final class Builder {
        private final String requestId;
        private int[] promptTokenIds;
        private String promptText;
        private SamplingReqConfig sampling;
        private int maxTokens;
        private int minTokens;
        private List<Integer> stopTokenIds = List.of();
        private boolean ignoreEos;
        private int priority;
        private OutputConstraint constraint;
        private List<ChatMessage> messages;
        private AudioInput audio;
        private String adapter;

        private Builder(String requestId) {
            this.requestId = requestId;
        }

        public Builder promptTokenIds(int[] ids) {
            this.promptTokenIds = ids;
            return this;
        }

        public Builder promptText(String text) {
            this.promptText = text;
            return this;
        }

        public Builder messages(List<ChatMessage> conversation) {
            this.messages = conversation;
            return this;
        }

        public Builder audio(AudioInput speech) {
            this.audio = speech;
            return this;
        }

        public Builder sampling(SamplingReqConfig config) {
            this.sampling = config;
            return this;
        }

        public Builder maxTokens(int tokens) {
            this.maxTokens = tokens;
            return this;
        }

        public Builder minTokens(int tokens) {
            this.minTokens = tokens;
            return this;
        }

        public Builder stopTokenIds(List<Integer> ids) {
            this.stopTokenIds = ids;
            return this;
        }

        public Builder ignoreEos(boolean ignore) {
            this.ignoreEos = ignore;
            return this;
        }

        public Builder priority(int level) {
            this.priority = level;
            return this;
        }

        public Builder constraint(OutputConstraint outputConstraint) {
            this.constraint = outputConstraint;
            return this;
        }

        /** The LoRA adapter to run with, by name; null (the default) for the base model. */
        public Builder adapter(String name) {
            this.adapter = name;
            return this;
        }

        /** @throws RequestValidationException naming the offending field */
        public GenerationRequest build() {
            return new GenerationRequest(requestId, promptTokenIds, promptText, sampling, maxTokens, minTokens,
                    stopTokenIds, ignoreEos, priority, constraint, messages, audio, adapter);
        }
    }
}
