package org.mstar.engine.whisper;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;
import org.mstar.engine.FinishReason;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.ModelRequest;
import org.mstar.model.whisper.WhisperPrompts;

/**
 * One transcription as the engine loop runs it: its audio cut into 30-second windows, each window one sequence —
 * the prompt {@code [<|startofprev|> previous text] <|startoftranscript|> <|lang|> <|task|> [<|notimestamps|>]},
 * then the tokens drawn (or replayed) — decoded from a freshly encoded context.
 *
 * <p>Without a language a multilingual model's first window stops its prompt at the start token, whose logits
 * name the language ({@link Yield#LOGITS}), then goes on. A window ends with its end token, at the decoder's last
 * position or after the tokens a window may generate; the output is every window's tokens in order, each window
 * but the last closed by its end token (so that a resume can tell the windows apart). Draws follow
 * generation_config: its suppress_tokens never, its begin_suppress_tokens not as a window's first token, and with
 * timestamps {@link org.mstar.model.whisper.TimestampRules}.
 *
 * <p>A resumed request replays: each window takes the output tokens of the earlier run as known (fed with its
 * prompt) instead of drawing them, so the run continues exactly where it stopped.
 */
final class Transcription implements ModelRequest {
    private final GenerationRequest request;
    private final WindowRules rules;
    private final List<float[]> windows;
    private final int taskToken;
    private final boolean timestamps;
    /** The language token: the request's, or detected at the first window; -1 until then, and for English-only ones. */
    private int languageToken;
    /** The window being decoded; -1 before the first. */
    private int window = -1;
    /** This window's decoder sequence: prompt, then tokens drawn (or replayed). */
    private final List<Integer> sequence = new ArrayList<>();
    /** Where the prompt ends in {@link #sequence}: before it, only prompt tokens. */
    private int promptLength;
    /** Output tokens of an earlier run not yet re-fed (resume), in order. */
    private final int[] replay;
    private int replayed;
    /** The previous window's tokens (its end token left out), for this window's prompt. */
    private int[] previousText = new int[0];

    Transcription(GenerationRequest request, WindowRules rules, int languageToken, int taskToken, int[] replay) {
        this.request = request;
        this.rules = rules;
        this.windows = WhisperPrompts.windows(request.audio().samples());
        this.languageToken = languageToken;
        this.taskToken = taskToken;
        this.timestamps = request.audio().timestamps();
        this.replay = replay.clone();
    }

    /** The current window's samples, which its first step encodes. */
    float[] windowSamples() {
        return windows.get(window);
    }

    @Override
    public int length() {
        return sequence.size();
    }

    @Override
    public int tokenAt(int i) {
        return sequence.get(i);
    }

    @Override
    public int promptLength() {
        return promptLength;
    }

    @Override
    public int[] sequenceGenerated() {
        return sequence.subList(promptLength, sequence.size()).stream().mapToInt(Integer::intValue).toArray();
    }

    @Override
    public int[] suppressed() {
        return rules.prompts().suppressAlways();
    }

    @Override
    public Yield yieldAtEnd() {
        if (rules.prompts().detectsLanguage(languageToken)) {
            return Yield.LOGITS;
        }
        return windowComplete(0) ? Yield.NOTHING : Yield.TOKEN;
    }

    @Override
    public boolean readsLogits() {
        return timestamps;
    }

    /** Begin-suppressed tokens at a window's first draw; with timestamps, also what the timestamp rules disallow. */
    @Override
    public int[] suppressNext(float[] logits) {
        int[] begin = sequence.size() == promptLength ? rules.prompts().suppressAtBegin() : new int[0];
        if (!timestamps) {
            return begin;
        }
        // the rules read the logits as the draw will see them
        for (int id : rules.prompts().suppressAlways()) {
            logits[id] = Float.NEGATIVE_INFINITY;
        }
        for (int id : begin) {
            logits[id] = Float.NEGATIVE_INFINITY;
        }
        boolean[] disallowed = rules.timestamps().disallowed(sequenceGenerated(), logits);
        int[] extra = IntStream.range(0, disallowed.length).filter(i -> disallowed[i]).toArray();
        int[] all = Arrays.copyOf(begin, begin.length + extra.length);
        System.arraycopy(extra, 0, all, begin.length, extra.length);
        return all;
    }

    /** The logits after the start token: the detected language, then the rest of the prompt. */
    @Override
    public int[] takeLogits(float[] logits) {
        languageToken = rules.prompts().detectLanguage(logits);
        return continueWindow();
    }

    @Override
    public FinishReason accept(int token, int generated) {
        sequence.add(token);
        if (generated >= request.maxTokens()) {
            return token == rules.eos() && lastWindow() ? FinishReason.STOP : FinishReason.LENGTH;
        }
        return null;
    }

    @Override
    public boolean sequenceEnded() {
        return windowComplete(0);
    }

    /** The last window's end finishes the request: by its end token, else by length. */
    @Override
    public FinishReason endSequence() {
        if (!lastWindow()) {
            return null;
        }
        return sequence.get(sequence.size() - 1) == rules.eos() ? FinishReason.STOP : FinishReason.LENGTH;
    }

    /**
     * Starts the next window: the prompt's head (up to the start token) and, once the language is known, the rest
     * of the prompt and the window's replayed tokens.
     */
    @Override
    public int[] nextSequence() {
        if (window >= 0) {
            int[] text = sequenceGenerated();
            if (text.length > 0 && text[text.length - 1] == rules.eos()) {
                text = Arrays.copyOf(text, text.length - 1);
            }
            previousText = text;
        }
        window++;
        sequence.clear();
        for (int t : rules.prompts().head(previousText)) {
            sequence.add(t);
        }
        promptLength = sequence.size();
        return rules.prompts().detectsLanguage(languageToken) ? new int[0] : continueWindow();
    }

    /** The prompt after the start token, then the tokens of this window an earlier run generated (returned). */
    private int[] continueWindow() {
        for (int t : rules.prompts().tail(languageToken, taskToken, timestamps)) {
            sequence.add(t);
        }
        promptLength = sequence.size();
        List<Integer> known = new ArrayList<>();
        while (replayed < replay.length && !windowComplete(known.size())) {
            int token = replay[replayed++];
            known.add(token);
            if (token == rules.eos()) {
                break;
            }
        }
        sequence.addAll(known);
        return known.stream().mapToInt(Integer::intValue).toArray();
    }

    private boolean lastWindow() {
        return window == windows.size() - 1;
    }

    /**
     * Whether the window, with {@code more} tokens still to add, ended: by its end token, its last position or the
     * tokens a window may generate.
     */
    private boolean windowComplete(int more) {
        int size = sequence.size();
        boolean ended = size > promptLength && sequence.get(size - 1) == rules.eos();
        boolean full = rules.maxWindowTokens() > 0 && size - promptLength + more >= rules.maxWindowTokens();
        return ended || full || size + more >= rules.maxPositions();
    }

    @Override
    public String toString() {
        return "Transcription[" + request.requestId() + ", window " + window + "/" + windows.size() + ", sequence "
                + sequence.size() + " (prompt " + promptLength + "), replayed " + replayed + "/" + replay.length + "]";
    }
}
