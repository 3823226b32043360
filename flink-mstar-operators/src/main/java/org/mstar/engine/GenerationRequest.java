package org.mstar.engine;

import java.util.List;
import org.mstar.model.chat.ChatMessage;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.constraint.OutputConstraint;

/**
 * One generation request as the engine takes it. Exactly one of {@code promptTokenIds}, {@code promptText} and
 * {@code messages} is set; text is tokenised by the engine, and messages are first rendered by the model's chat
 * template. {@code maxTokens} bounds generated tokens; {@code minTokens} holds back EOS and stop ids until
 * reached. The sampler's seed is in {@code sampling}. {@code constraint}, when not null, is what the output must
 * match (structured output).
 */
public record GenerationRequest(String requestId, int[] promptTokenIds, String promptText, SamplingReqConfig sampling,
                                int maxTokens, int minTokens, List<Integer> stopTokenIds, boolean ignoreEos,
                                int priority, OutputConstraint constraint, List<ChatMessage> messages) {
    public GenerationRequest {
        stopTokenIds = stopTokenIds == null ? List.of() : List.copyOf(stopTokenIds);
        messages = messages == null ? null : List.copyOf(messages);
    }

    /** An unconstrained request with a prompt (text or ids) rather than a conversation. */
    public GenerationRequest(String requestId, int[] promptTokenIds, String promptText, SamplingReqConfig sampling,
                             int maxTokens, int minTokens, List<Integer> stopTokenIds, boolean ignoreEos, int priority) {
        this(requestId, promptTokenIds, promptText, sampling, maxTokens, minTokens, stopTokenIds, ignoreEos, priority,
                null, null);
    }
}
