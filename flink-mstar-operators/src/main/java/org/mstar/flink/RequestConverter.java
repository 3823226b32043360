package org.mstar.flink;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationRequest;
import org.mstar.model.chat.ChatMessage;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.schemas.ChatTurn;
import org.mstar.schemas.GenerateRequest;

/**
 * Turns a wire {@link GenerateRequest} into the engine's {@link GenerationRequest}: fills defaults and checks what
 * only the wire form can get wrong (which prompt field is set, null or negative ids, sampling options); the
 * request's own limits are checked as it is built. Model limits (context length, vocabulary) are the engine's
 * to check in {@code submit}.
 */
final class RequestConverter implements Serializable {
    private static final long serialVersionUID = 1L;

    /** The keys {@code sampling_options} accepts. */
    static final Set<String> SAMPLING_OPTIONS =
            Set.of("repetition_window", "top_p_first", "top_p_min_keep", "penalize_prompt");

    private final int defaultMaxTokens;
    private final AudioConverter audio;

    /**
     * @param defaultMaxTokens max_tokens of a request that sets none, >= 1
     * @param audio reads and checks the audio of speech-to-text requests
     */
    RequestConverter(int defaultMaxTokens, AudioConverter audio) {
        this.defaultMaxTokens = defaultMaxTokens;
        this.audio = audio;
    }

    /** @throws RequestValidationException naming the offending field */
    GenerationRequest convert(GenerateRequest r) {
        String id = r.getRequestId();
        if (id == null || id.isBlank()) {
            throw new RequestValidationException("request_id", "must not be empty");
        }
        int[] promptIds = promptIds(r);
        String promptText = promptIds == null ? r.getPrompt() : null;
        int maxTokens = orDefault(r.getMaxTokens(), defaultMaxTokens);
        int minTokens = orDefault(r.getMinTokens(), 0);
        List<Integer> stopIds = r.getStopTokenIds();
        for (Integer stop : stopIds) {
            if (stop == null || stop < 0) {
                throw new RequestValidationException("stop_token_ids", "ids must be >= 0, got " + stop);
            }
        }
        SamplingReqConfig sampling = sampling(r, id, minTokens);
        sampling.validate(null);
        AudioInput speech = r.getAudio() == null ? null : audio.convert(r.getAudio());
        // the request's own limits (max and min tokens, an empty conversation) are checked as it is built
        return GenerationRequest.builder(id).promptTokenIds(promptIds).promptText(promptText).messages(messages(r))
                .audio(speech).sampling(sampling).maxTokens(maxTokens).minTokens(minTokens).stopTokenIds(stopIds)
                .ignoreEos(r.getIgnoreEos()).priority(orDefault(r.getPriority(), 0)).constraint(constraint(r))
                .adapter(r.getAdapter()).build();
    }

    /** The request's structured-output constraint, or null; at most one of the three fields may be set. */
    private static OutputConstraint constraint(GenerateRequest r) {
        List<OutputConstraint> set = new java.util.ArrayList<>();
        if (r.getJsonSchema() != null) {
            set.add(OutputConstraint.jsonSchema(r.getJsonSchema()));
        }
        if (r.getRegex() != null) {
            set.add(OutputConstraint.regex(r.getRegex()));
        }
        if (r.getChoices() != null) {
            set.add(OutputConstraint.choice(r.getChoices()));
        }
        if (set.size() > 1) {
            throw new RequestValidationException(set.get(0).kind().field(),
                    "set at most one of json_schema, regex and choices");
        }
        return set.isEmpty() ? null : set.get(0);
    }

    private static int[] promptIds(GenerateRequest r) {
        boolean hasText = r.getPrompt() != null;
        boolean hasIds = r.getPromptTokenIds() != null;
        boolean hasMessages = r.getMessages() != null;
        boolean hasAudio = r.getAudio() != null;
        if ((hasText ? 1 : 0) + (hasIds ? 1 : 0) + (hasMessages ? 1 : 0) + (hasAudio ? 1 : 0) != 1) {
            throw new RequestValidationException("prompt",
                    "set exactly one of prompt, prompt_token_ids, messages and audio");
        }
        if (hasMessages || hasAudio) {
            return null;
        }
        if (hasText) {
            if (r.getPrompt().isEmpty()) {
                throw new RequestValidationException("prompt", "must not be empty");
            }
            return null;
        }
        List<Integer> ids = r.getPromptTokenIds();
        if (ids.isEmpty()) {
            throw new RequestValidationException("prompt_token_ids", "must not be empty");
        }
        int[] out = new int[ids.size()];
        for (int i = 0; i < out.length; i++) {
            Integer id = ids.get(i);
            if (id == null || id < 0) {
                throw new RequestValidationException("prompt_token_ids", "ids must be >= 0, got " + id + " at " + i);
            }
            out[i] = id;
        }
        return out;
    }

    /** The conversation, or null; its rendering is the engine's (it holds the model's chat template). */
    private static List<ChatMessage> messages(GenerateRequest r) {
        if (r.getMessages() == null) {
            return null;
        }
        List<ChatMessage> out = new ArrayList<>();
        for (ChatTurn t : r.getMessages()) {
            out.add(new ChatMessage(t.getRole(), t.getContent()));
        }
        return out;
    }

    private static SamplingReqConfig sampling(GenerateRequest r, String requestId, int minTokens) {
        Map<String, String> options = r.getSamplingOptions();
        for (String key : options.keySet()) {
            if (!SAMPLING_OPTIONS.contains(key)) {
                throw new RequestValidationException("sampling_options",
                        "unknown option '" + key + "'; known: " + String.join(", ", SAMPLING_OPTIONS.stream().sorted().toList()));
            }
        }
        SamplingReqConfig d = SamplingReqConfig.DEFAULTS;
        // speech is transcribed greedily unless the request asks otherwise, as Whisper decodes by default
        double defaultTemperature = r.getAudio() != null ? 0.0 : d.temperature();
        return new SamplingReqConfig(
                orDefault(r.getTemperature(), defaultTemperature),
                orDefault(r.getTopK(), d.topK()),
                orDefault(r.getTopP(), d.topP()),
                r.getIgnoreEos(),
                orDefault(r.getRepetitionPenalty(), d.repetitionPenalty()),
                orDefault(r.getMinP(), d.minP()),
                intOption(options, "repetition_window", d.repetitionWindow()),
                minTokens,
                boolOption(options, "top_p_first", d.topPFirst()),
                intOption(options, "top_p_min_keep", d.topPMinKeep()),
                boolOption(options, "penalize_prompt", d.penalizePrompt()),
                r.getSeed() != null ? r.getSeed() : seedOf(requestId));
    }

    /**
     * A stable seed for a request that sets none: requests with equal prompts still sample differently, and a
     * replay of the same request after a restore samples the same tokens.
     */
    static long seedOf(String requestId) {
        long h = 0xcbf29ce484222325L; // FNV-1a, 64 bit
        for (byte b : requestId.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    private static int intOption(Map<String, String> options, String key, int fallback) {
        String v = options.get(key);
        if (v == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new RequestValidationException("sampling_options." + key, "must be an integer, got '" + v + "'");
        }
    }

    private static boolean boolOption(Map<String, String> options, String key, boolean fallback) {
        String v = options.get(key);
        if (v == null) {
            return fallback;
        }
        return switch (v.trim().toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new RequestValidationException("sampling_options." + key, "must be true or false, got '" + v + "'");
        };
    }

    private static <T> T orDefault(T value, T fallback) {
        return value != null ? value : fallback;
    }
}
