package org.mstar.model.whisper;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalInt;

/**
 * The special tokens of a Whisper {@code tokenizer.json} ({@code added_tokens}), looked up by name as transformers'
 * WhisperTokenizer does ({@code convert_tokens_to_ids("<|notimestamps|>")}): where generation_config.json lacks the
 * ids decoding needs (English-only and older checkpoints), they come from here.
 */
final class WhisperSpecialTokens {
    static final String START = "<|startoftranscript|>";
    static final String TRANSLATE = "<|translate|>";
    static final String TRANSCRIBE = "<|transcribe|>";
    static final String NO_TIMESTAMPS = "<|notimestamps|>";
    static final String START_OF_PREVIOUS = "<|startofprev|>";

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Map<String, Integer> ids;
    private final boolean read;

    private WhisperSpecialTokens(Map<String, Integer> ids, boolean read) {
        this.ids = ids;
        this.read = read;
    }

    /** The added tokens of {@code tokenizerJson}; none when the file is absent. */
    static WhisperSpecialTokens read(Path tokenizerJson) throws IOException {
        Map<String, Integer> ids = new LinkedHashMap<>();
        boolean exists = Files.isRegularFile(tokenizerJson);
        if (exists) {
            for (JsonNode added : JSON.readTree(tokenizerJson.toFile()).path("added_tokens")) {
                ids.put(added.path("content").asText(), added.path("id").asInt());
            }
        }
        return new WhisperSpecialTokens(ids, exists);
    }

    /** Whether there was a tokenizer.json to read. */
    boolean read() {
        return read;
    }

    OptionalInt id(String token) {
        Integer id = ids.get(token);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    /**
     * ISO 639 code → language token: the {@code <|code|>} tokens between {@code <|startoftranscript|>}
     * and {@code <|translate|>}, where every Whisper vocabulary puts its languages (openai's tokenizer writes them
     * there, in its LANGUAGES order); empty when either bound is missing.
     */
    Map<String, Integer> languages() {
        OptionalInt start = id(START);
        OptionalInt translate = id(TRANSLATE);
        Map<String, Integer> out = new LinkedHashMap<>();
        if (start.isEmpty() || translate.isEmpty()) {
            return out;
        }
        ids.forEach((token, id) -> {
            if (id > start.getAsInt() && id < translate.getAsInt() && token.startsWith("<|") && token.endsWith("|>")) {
                out.put(token.substring(2, token.length() - 2), id);
            }
        });
        return out;
    }

    /** "transcribe" / "translate" → task token; empty unless the tokenizer has both. */
    Map<String, Integer> tasks() {
        OptionalInt transcribe = id(TRANSCRIBE);
        OptionalInt translate = id(TRANSLATE);
        if (transcribe.isEmpty() || translate.isEmpty()) {
            return Map.of();
        }
        return Map.of(WhisperPrompts.TRANSLATE, translate.getAsInt(), WhisperPrompts.TRANSCRIBE,
                transcribe.getAsInt());
    }
}
