package org.mstar.model.whisper;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.model.ModelFormatException;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * A Whisper checkpoint's geometry (config.json, {@code model_type: whisper}) and the token ids its decoding needs
 * (generation_config.json): the start, language, task, no-timestamps and previous-text tokens, and the tokens to
 * suppress always and at the first generated position.
 *
 * @param langToId ISO 639 code ("en") → its language token id; empty for an English-only model
 * @param taskToId "transcribe" / "translate" → task token id; empty for an English-only model
 * @param maxInitialTimestampIndex the latest timestamp index the first timestamp may take (-1: no limit)
 */
public record WhisperConfig(int vocabSize, int numMelBins, int dModel, int encoderLayers, int encoderHeads,
                            int encoderFfn, int decoderLayers, int decoderHeads, int decoderFfn,
                            int maxSourcePositions, int maxTargetPositions, boolean scaleEmbedding,
                            int decoderStartTokenId, int eosTokenId, Map<String, Integer> langToId,
                            Map<String, Integer> taskToId, int noTimestampsTokenId, int prevSotTokenId,
                            List<Integer> suppressTokens, List<Integer> beginSuppressTokens,
                            int maxInitialTimestampIndex) {
    /** config.json's {@code model_type} of a Whisper checkpoint. */
    public static final String MODEL_TYPE = "whisper";
    /** LayerNorm's epsilon: transformers builds Whisper's norms with PyTorch's default. */
    public static final float LAYER_NORM_EPS = 1e-5f;
    /** Audio samples per second the feature extractor takes. */
    public static final int SAMPLE_RATE = 16_000;
    /** Seconds of audio one encoder pass covers. */
    public static final int WINDOW_SECONDS = 30;

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String GENERATION_CONFIG = "generation_config.json";
    private static final String TOKENIZER = TextTokenizer.FILE_NAME;
    /** openai's Whisper: a vocabulary this large or larger is multilingual. */
    private static final int MULTILINGUAL_VOCAB = 51865;

    public WhisperConfig {
        langToId = Map.copyOf(langToId);
        taskToId = Map.copyOf(taskToId);
        suppressTokens = List.copyOf(suppressTokens);
        beginSuppressTokens = List.copyOf(beginSuppressTokens);
        if (dModel % encoderHeads != 0 || dModel % decoderHeads != 0) {
            throw new ModelFormatException("d_model " + dModel + " is not a multiple of the attention heads ("
                    + encoderHeads + " encoder, " + decoderHeads + " decoder)");
        }
    }

    /** Whether {@code folder}'s config.json declares {@code model_type: whisper}. */
    public static boolean isWhisper(Path folder) {
        Path file = folder.resolve("config.json");
        if (!Files.isRegularFile(file)) {
            return false;
        }
        try {
            JsonNode type = JSON.readTree(file.toFile()).get("model_type");
            return type != null && MODEL_TYPE.equals(type.asText());
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Reads config.json and generation_config.json of {@code folder}. Ids generation_config.json lacks come from
     * tokenizer.json's special tokens, as transformers' WhisperTokenizer names them; without generation_config.json
     * (checkpoints older than it) its keys are read from config.json, as transformers' GenerationConfig does.
     * An English-only model ({@link #multilingual()} false) has no language or task token to force.
     *
     * @throws ModelFormatException naming the file and key that is missing or not as Whisper has it
     */
    public static WhisperConfig load(Path folder) throws IOException {
        Fields c = Fields.read(folder.resolve("config.json"));
        if (!MODEL_TYPE.equals(c.string("model_type"))) {
            throw c.error("model_type is '" + c.string("model_type") + "', not '" + MODEL_TYPE + "'");
        }
        String activation = c.node.has("activation_function") ? c.string("activation_function") : "gelu";
        if (!activation.equals("gelu")) {
            throw c.error("activation_function '" + activation + "' is not supported; Whisper uses 'gelu'");
        }
        Path generationFile = folder.resolve(GENERATION_CONFIG);
        Fields g = Files.isRegularFile(generationFile) ? Fields.read(generationFile) : c;
        WhisperSpecialTokens special = WhisperSpecialTokens.read(folder.resolve(TOKENIZER));
        boolean multilingual = multilingual(g, c.integer("vocab_size"));
        return new WhisperConfig(c.integer("vocab_size"), c.integer("num_mel_bins"), c.integer("d_model"),
                c.integer("encoder_layers"), c.integer("encoder_attention_heads"), c.integer("encoder_ffn_dim"),
                c.integer("decoder_layers"), c.integer("decoder_attention_heads"), c.integer("decoder_ffn_dim"),
                c.integer("max_source_positions"), c.integer("max_target_positions"),
                c.node.path("scale_embedding").asBoolean(false),
                g.integer("decoder_start_token_id"), g.tokenId("eos_token_id"),
                multilingual ? languages(g, special, folder) : Map.of(),
                multilingual ? tasks(g, special, folder) : Map.of(),
                g.node.has("no_timestamps_token_id") ? g.integer("no_timestamps_token_id")
                        : special.id(WhisperSpecialTokens.NO_TIMESTAMPS).orElseThrow(() -> missing(folder, special,
                                "no_timestamps_token_id", WhisperSpecialTokens.NO_TIMESTAMPS)),
                g.node.has("prev_sot_token_id") ? g.integer("prev_sot_token_id")
                        : special.id(WhisperSpecialTokens.START_OF_PREVIOUS).orElse(-1),
                g.ids("suppress_tokens"), g.ids("begin_suppress_tokens"),
                g.node.hasNonNull("max_initial_timestamp_index") ? g.integer("max_initial_timestamp_index") : -1);
    }

    /**
     * generation_config's {@code is_multilingual} when it says; else whether it maps languages; else openai's rule:
     * the multilingual vocabularies have 51865 tokens or more, the English-only ones 51864.
     */
    private static boolean multilingual(Fields g, int vocabSize) {
        JsonNode declared = g.node.get("is_multilingual");
        if (declared != null && declared.isBoolean()) {
            return declared.booleanValue();
        }
        return g.node.has("lang_to_id") || vocabSize >= MULTILINGUAL_VOCAB;
    }

    /** lang_to_id's keys are the tokens ("<|en|>"); requests name the code ("en"). */
    private static Map<String, Integer> languages(Fields g, WhisperSpecialTokens special, Path folder) {
        if (!g.node.has("lang_to_id")) {
            Map<String, Integer> derived = special.languages();
            if (derived.isEmpty()) {
                throw missing(folder, special, "lang_to_id", "<|en|>-like language tokens between "
                        + WhisperSpecialTokens.START + " and " + WhisperSpecialTokens.TRANSLATE);
            }
            return derived;
        }
        Map<String, Integer> out = new LinkedHashMap<>();
        g.idMap("lang_to_id").forEach((token, id) -> {
            if (!token.startsWith("<|") || !token.endsWith("|>")) {
                throw g.error("lang_to_id key '" + token + "' is not a <|code|> token");
            }
            out.put(token.substring(2, token.length() - 2), id);
        });
        return out;
    }

    private static Map<String, Integer> tasks(Fields g, WhisperSpecialTokens special, Path folder) {
        if (g.node.has("task_to_id")) {
            return g.idMap("task_to_id");
        }
        Map<String, Integer> derived = special.tasks();
        if (derived.isEmpty()) {
            throw missing(folder, special, "task_to_id",
                    WhisperSpecialTokens.TRANSCRIBE + " and " + WhisperSpecialTokens.TRANSLATE);
        }
        return derived;
    }

    private static ModelFormatException missing(Path folder, WhisperSpecialTokens special, String key, String tokens) {
        return new ModelFormatException(folder + ": " + GENERATION_CONFIG + " has no " + key + ", and "
                + (special.read() ? TOKENIZER + " has no " + tokens + " to derive it from"
                        : "there is no " + TOKENIZER + " to derive it from"));
    }

    /** Whether the model knows languages and tasks; an English-only one only transcribes English. */
    public boolean multilingual() {
        return !langToId.isEmpty();
    }

    public int encoderHeadDim() {
        return dModel / encoderHeads;
    }

    public int decoderHeadDim() {
        return dModel / decoderHeads;
    }

    /** Encoder frames after the stride-2 convolution: one per 20 ms of a 30-second window. */
    public int encoderFrames() {
        return maxSourcePositions;
    }

    /** Mel frames of one window: the stride-2 convolution halves them to {@link #encoderFrames()}. */
    public int melFrames() {
        return 2 * maxSourcePositions;
    }

    /** The first timestamp token, {@code <|0.00|>}: right after {@code <|notimestamps|>}, as in every Whisper. */
    public int timestampBegin() {
        return noTimestampsTokenId + 1;
    }

    /** The language token ids, ascending. */
    public int[] languageTokenIds() {
        return langToId.values().stream().mapToInt(Integer::intValue).sorted().toArray();
    }

    /** The geometry of openai/whisper-small (random-weight benchmarks; multilingual vocabulary). */
    public static WhisperConfig small() {
        return geometry(51865, 80, 768, 12, 12, 3072);
    }

    /** The geometry of openai/whisper-large-v3 (random-weight benchmarks; 128 mel bins, 100 languages). */
    public static WhisperConfig largeV3() {
        return geometry(51866, 128, 1280, 32, 20, 5120);
    }

    /** Whisper's token layout: text below 50257, then end of text, start, the languages, the tasks, ... */
    private static WhisperConfig geometry(int vocab, int mels, int d, int layers, int heads, int ffn) {
        int eot = 50257;
        int languages = vocab - 51766; // 99 languages in the 51865-token vocabularies, 100 in large-v3's
        Map<String, Integer> langs = new LinkedHashMap<>();
        langs.put("en", eot + 2);
        for (int i = 1; i < languages; i++) {
            langs.put("l" + i, eot + 2 + i);
        }
        int translate = eot + 2 + languages;
        return new WhisperConfig(vocab, mels, d, layers, heads, ffn, layers, heads, ffn, 1500, 448, false,
                eot + 1, eot, langs, Map.of("translate", translate, "transcribe", translate + 1), translate + 5,
                translate + 3, List.of(), List.of(220, eot), 50);
    }

    /** Typed reads of one JSON file, with errors naming it. */
    private record Fields(JsonNode node, Path file) {
        static Fields read(Path file) throws IOException {
            if (!Files.isRegularFile(file)) {
                throw new ModelFormatException(file + " is missing: a Whisper folder has config.json");
            }
            return new Fields(JSON.readTree(file.toFile()), file);
        }

        int integer(String key) {
            JsonNode v = node.get(key);
            if (v == null || !v.canConvertToInt() || !v.isIntegralNumber()) {
                throw error(v == null ? "missing required key '" + key + "'" : "'" + key + "' must be an integer, got " + v);
            }
            return v.intValue();
        }

        String string(String key) {
            JsonNode v = node.get(key);
            if (v == null || !v.isTextual()) {
                throw error(v == null ? "missing required key '" + key + "'" : "'" + key + "' must be a string, got " + v);
            }
            return v.textValue();
        }

        /** An id given as an integer or as a list whose first element is the one used. */
        int tokenId(String key) {
            JsonNode v = node.get(key);
            if (v != null && v.isArray() && !v.isEmpty()) {
                return v.get(0).intValue();
            }
            return integer(key);
        }

        List<Integer> ids(String key) {
            JsonNode v = node.get(key);
            List<Integer> out = new ArrayList<>();
            if (v == null || v.isNull()) {
                return out;
            }
            if (!v.isArray()) {
                throw error("'" + key + "' must be a list of token ids, got " + v);
            }
            v.forEach(e -> out.add(e.intValue()));
            return out;
        }

        Map<String, Integer> idMap(String key) {
            JsonNode v = node.get(key);
            if (v == null || !v.isObject() || v.isEmpty()) {
                throw error("missing '" + key + "' (a map of tokens to ids; Whisper's generation_config.json has it)");
            }
            Map<String, Integer> out = new LinkedHashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = v.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                out.put(e.getKey(), e.getValue().intValue());
            }
            return out;
        }

        ModelFormatException error(String what) {
            return new ModelFormatException(file + ": " + what);
        }
    }
}
