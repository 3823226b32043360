package org.mstar.engine.whisper;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.engine.GenerationRequest;
import org.mstar.model.tokenizer.IncrementalDetokenizer;

/**
 * The engine's state of one request: its audio cut into windows, the window being decoded and, for that window,
 * the decoder sequence (prompt, then generated tokens) of which {@code computed} have their K/V cached.
 *
 * <p>Output: the tokens of every window in order, each window but the last closed by the end token (so that a
 * resume can tell the windows apart); a window also ends, without an end token, when it reaches the decoder's
 * positions. On {@link WhisperEngine#resume} the output so far is {@code replay}: each window takes its tokens
 * from it (fed with the prompt) instead of sampling them, so the run continues exactly where it stopped.
 */
final class Transcription {
    enum Phase {
        /** Waiting for a slot and pages. */
        WAITING,
        /** The next step encodes the window and feeds the prompt's head. */
        ENCODE,
        /** The window's context is written; the sequence is fed up to its end. */
        DECODE
    }

    final GenerationRequest request;
    final List<float[]> windows;
    final int taskToken;
    final boolean timestamps;
    final long arrivalNanos;
    /** The language token: the request's, or detected at the first window; -1 until then, and for English-only ones. */
    int languageToken;
    Phase phase = Phase.WAITING;
    int window;
    /** This window's decoder sequence: prompt, then tokens generated (or replayed). */
    final List<Integer> sequence = new ArrayList<>();
    /** Where the prompt ends in {@link #sequence}: before it, only prompt tokens. */
    int promptLength;
    /** Leading tokens of {@link #sequence} whose K/V are cached. */
    int computed;
    /** Every output token so far, across windows. */
    final List<Integer> output = new ArrayList<>();
    /** Output tokens of an earlier run not yet re-fed (resume), in order. */
    final int[] replay;
    int replayed;
    /** The previous window's tokens (its end token left out), for this window's prompt. */
    int[] previousText = new int[0];
    IncrementalDetokenizer detokenizer;
    /** Whether it was in a step that threw: it runs alone until a step of it succeeds. */
    boolean suspect;
    long firstTokenNanos = -1;
    long lastTokenNanos = -1;

    Transcription(GenerationRequest request, List<float[]> windows, int languageToken, int taskToken, int[] replay,
                  long arrivalNanos) {
        this.request = request;
        this.windows = windows;
        this.languageToken = languageToken;
        this.taskToken = taskToken;
        this.timestamps = request.audio().timestamps();
        this.replay = replay;
        this.arrivalNanos = arrivalNanos;
    }

    String id() {
        return request.requestId();
    }

    boolean lastWindow() {
        return window == windows.size() - 1;
    }

    /** Tokens generated (or replayed) in this window, after its prompt. */
    int[] windowTokens() {
        return sequence.subList(promptLength, sequence.size()).stream().mapToInt(Integer::intValue).toArray();
    }

    /** The tokens to feed next: the part of the sequence not yet cached. */
    int[] pending() {
        return sequence.subList(computed, sequence.size()).stream().mapToInt(Integer::intValue).toArray();
    }

    boolean replaying() {
        return replayed < replay.length;
    }

    int nextReplayed() {
        return replay[replayed++];
    }

    int[] outputArray() {
        return output.stream().mapToInt(Integer::intValue).toArray();
    }

    void startWindow(int[] head) {
        sequence.clear();
        for (int t : head) {
            sequence.add(t);
        }
        promptLength = head.length;
        computed = 0;
        phase = Phase.ENCODE;
    }

    void extendPrompt(int[] tokens) {
        for (int t : tokens) {
            sequence.add(t);
        }
        promptLength = sequence.size();
    }

    @Override
    public String toString() {
        return "Transcription[" + id() + ", window " + window + "/" + windows.size() + ", " + phase + ", computed "
                + computed + "/" + sequence.size() + ", output " + output.size() + ", replay "
                + Arrays.toString(new int[] {replayed, replay.length}) + "]";
    }
}
