package org.mstar.engine.whisper;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.whisper.audio.LogMelSpectrogram;

/**
 * The tiny Whisper checkpoint and transformers' outputs on it, written by
 * {@code scripts/fixtures/write_whisper_fixtures.py}: the clips, the tone's features and encoder output, and per
 * case and window the prompt, the raw logits of each generated position and the greedy tokens.
 */
final class WhisperFixture {
    record Window(int[] prompt, int[] tokens, float[][] logits, float[] detectLogits) {}

    record Case(String name, List<String> audio, String language, String task, boolean timestamps,
                List<Window> windows) {
        /** Every window's tokens in order: the engine's output. */
        int[] output() {
            return windows.stream().flatMapToInt(w -> java.util.Arrays.stream(w.tokens())).toArray();
        }
    }

    static final int SAMPLE_RATE = 16_000;

    final Path folder;
    final int maxNewTokens;
    final Map<String, float[]> clips = new HashMap<>();
    /** transformers' features of the tone, channels-major {@code [80, 3000]}. */
    final float[] toneFeatures;
    /** transformers' encoder output on the tone, {@code [1500, 64]}. */
    final float[] toneEncoded;
    final List<Case> cases = new ArrayList<>();

    WhisperFixture() throws IOException, URISyntaxException {
        folder = Path.of(WhisperFixture.class.getResource("/org/mstar/model/fixtures/whisper").toURI());
        JsonNode json = new ObjectMapper().readTree(folder.resolve("cases.json").toFile());
        maxNewTokens = json.get("max_new_tokens").intValue();
        try (SafetensorsFile f = SafetensorsFile.open(folder.resolve("reference.safetensors"))) {
            clips.put("tone", f.floats("audio.tone"));
            clips.put("noise", f.floats("audio.noise"));
            toneFeatures = f.floats("features.tone");
            toneEncoded = f.floats("encoder.tone");
            for (JsonNode c : json.get("cases")) {
                String name = c.get("name").textValue();
                List<Window> windows = new ArrayList<>();
                for (int w = 0; w < c.get("windows").intValue(); w++) {
                    String key = name + "." + w;
                    float[] flat = f.floats(key + ".logits");
                    int steps = (int) f.info(key + ".logits").shape()[0];
                    int vocab = flat.length / steps;
                    float[][] logits = new float[steps][];
                    for (int s = 0; s < steps; s++) {
                        logits[s] = java.util.Arrays.copyOfRange(flat, s * vocab, (s + 1) * vocab);
                    }
                    float[] detect = f.contains(key + ".detect_logits") ? f.floats(key + ".detect_logits") : null;
                    windows.add(new Window(f.ints(key + ".prompt"), f.ints(key + ".tokens"), logits,
                            detect));
                }
                List<String> audio = new ArrayList<>();
                c.get("audio").forEach(a -> audio.add(a.textValue()));
                cases.add(new Case(name, audio, c.get("language").isNull() ? null : c.get("language").textValue(),
                        c.get("task").textValue(), c.get("timestamps").booleanValue(), windows));
            }
        }
    }

    Case find(String name) {
        return cases.stream().filter(c -> c.name().equals(name)).findFirst().orElseThrow();
    }

    /** A case's audio: its clips in order, "silence:S" being S seconds of zeros. */
    float[] audio(Case c) {
        List<float[]> parts = new ArrayList<>();
        for (String a : c.audio()) {
            parts.add(a.startsWith("silence:") ? new float[Integer.parseInt(a.substring(8)) * SAMPLE_RATE] : clips.get(a));
        }
        float[] out = new float[parts.stream().mapToInt(p -> p.length).sum()];
        int at = 0;
        for (float[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    /** The tone's features frames-major {@code [3000, 80]}, as the engine takes them. */
    float[] toneFeaturesFramesMajor() {
        return LogMelSpectrogram.framesMajor(toneFeatures, 80);
    }
}
