package org.mstar.model.whisper;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.IntStream;
import org.mstar.resources.RequestValidationException;

/**
 * The decoder side of Whisper's decoding: the prompt of each 30-second window
 * ({@code [<|startofprev|> previous text] <|startoftranscript|> <|lang|> <|task|> [<|notimestamps|>]}), the
 * request checks on language and task, the tokens to suppress, and how audio is cut into windows.
 */
public final class WhisperPrompts {
    /** Transcribe in the spoken language. */
    public static final String TRANSCRIBE = "transcribe";
    /** Translate into English. */
    public static final String TRANSLATE = "translate";
    /** The one language of an English-only model. */
    private static final String ENGLISH = "en";

    private final WhisperConfig config;

    public WhisperPrompts(WhisperConfig config) {
        this.config = config;
    }

    /**
     * The token of an ISO 639 code, or -1 for null (the model detects the language) and for an English-only model,
     * which has no language token to force.
     *
     * @throws RequestValidationException naming {@code audio.language} and the codes the model knows
     */
    public int languageToken(String language) {
        if (!config.multilingual()) {
            if (language == null || language.equals(ENGLISH)) {
                return -1;
            }
            throw new RequestValidationException("audio.language", "'" + language + "': this model is English-only;"
                    + " leave the language unset or '" + ENGLISH + "'");
        }
        if (language == null) {
            return -1;
        }
        Integer id = config.langToId().get(language);
        if (id == null) {
            throw new RequestValidationException("audio.language", "'" + language + "' is not a language this model"
                    + " knows; known: " + new TreeSet<>(config.langToId().keySet()) + ", or none to detect it");
        }
        return id;
    }

    /**
     * The token of a task; null means transcribe. -1 for an English-only model, which only transcribes and has no
     * task token to force.
     *
     * @throws RequestValidationException naming {@code audio.task}
     */
    public int taskToken(String task) {
        String name = task == null ? TRANSCRIBE : task;
        if (!config.multilingual()) {
            if (name.equals(TRANSCRIBE)) {
                return -1;
            }
            throw new RequestValidationException("audio.task", "'" + task + "': this model is English-only and only"
                    + " transcribes");
        }
        Integer id = config.taskToId().get(name);
        if (id == null) {
            throw new RequestValidationException("audio.task", "'" + task + "' is not a task; use '" + TRANSCRIBE
                    + "' or '" + TRANSLATE + "'");
        }
        return id;
    }

    /** Whether a window must detect the language first: none given to a multilingual model. */
    public boolean detectsLanguage(int languageToken) {
        return languageToken < 0 && config.multilingual();
    }

    /**
     * The prompt up to and including {@code <|startoftranscript|>}: the previous window's text after
     * {@code <|startofprev|>} (its last {@code max_target_positions / 2 - 1} tokens, as transformers keeps) when there
     * is any and the model has that token, then the start token.
     */
    public int[] head(int[] previousText) {
        List<Integer> out = new ArrayList<>();
        if (previousText.length > 0 && config.prevSotTokenId() >= 0) {
            int keep = Math.min(previousText.length, config.maxTargetPositions() / 2 - 1);
            out.add(config.prevSotTokenId());
            for (int i = previousText.length - keep; i < previousText.length; i++) {
                out.add(previousText[i]);
            }
        }
        out.add(config.decoderStartTokenId());
        return out.stream().mapToInt(Integer::intValue).toArray();
    }

    /**
     * The tokens after the start token: the language and the task where the model has them (-1: none), and, without
     * timestamps, {@code <|notimestamps|>}.
     */
    public int[] tail(int language, int task, boolean timestamps) {
        return IntStream.of(language, task, timestamps ? -1 : config.noTimestampsTokenId()).filter(id -> id >= 0)
                .toArray();
    }

    /** Tokens no draw may take (generation_config's suppress_tokens). */
    public int[] suppressAlways() {
        return config.suppressTokens().stream().mapToInt(Integer::intValue).toArray();
    }

    /** Tokens the first draw of a window may not take (begin_suppress_tokens: a leading space, the end). */
    public int[] suppressAtBegin() {
        return config.beginSuppressTokens().stream().mapToInt(Integer::intValue).toArray();
    }

    /** The detected language: the language token with the largest logit (the first on ties). */
    public int detectLanguage(float[] logits) {
        int best = -1;
        for (int id : config.languageTokenIds()) {
            if (best < 0 || logits[id] > logits[best]) {
                best = id;
            }
        }
        return best;
    }

    /** The ISO 639 code of a language token, or null. */
    public String languageCode(int token) {
        for (Map.Entry<String, Integer> e : config.langToId().entrySet()) {
            if (e.getValue() == token) {
                return e.getKey();
            }
        }
        return null;
    }

    /**
     * {@code samples} cut into consecutive 30-second windows (the last one shorter), each featurised and padded on
     * its own.
     *
     * @throws RequestValidationException naming {@code audio.samples} when there are none
     */
    public static List<float[]> windows(float[] samples) {
        if (samples == null || samples.length == 0) {
            throw new RequestValidationException("audio.samples", "is empty; a transcription needs audio");
        }
        int size = WhisperConfig.SAMPLE_RATE * WhisperConfig.WINDOW_SECONDS;
        List<float[]> out = new ArrayList<>();
        for (int start = 0; start < samples.length; start += size) {
            out.add(Arrays.copyOfRange(samples, start, Math.min(samples.length, start + size)));
        }
        return out;
    }
}
