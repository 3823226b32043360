package org.mstar.device.cuda.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.engine.whisper.WhisperEngine;
import org.mstar.engine.whisper.WhisperEngineLoader;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;
import org.mstar.model.whisper.WhisperWeights;
import org.mstar.model.whisper.audio.LogMelSpectrogram;

/**
 * Whisper fidelity on one device and dtype against transformers' fp32 outputs on the tiny checkpoint that
 * {@code scripts/fixtures/write_whisper_fixtures.py} writes (its folder: config, weights, reference.safetensors,
 * cases.json): the Java log-mel features of the tone, the encoder's output on transformers' features, and for every
 * case (language given and detected, timestamps, two 30-second windows) served together, the raw logits of each
 * generated position and the greedy tokens. Logits are compared up to the first token that differs (after it the
 * two runs condition on different text).
 */
final class WhisperChecks {
    /** One compared quantity: relative L2 error {@code ‖got − want‖ / ‖want‖} and the largest absolute difference. */
    record Row(String what, double relError, double maxAbs, String tokens) {}

    private static final int SAMPLE_RATE = 16_000;
    private final Path fixture;

    WhisperChecks(Path fixture) {
        this.fixture = fixture;
    }

    /** Runs everything on {@code device} with weights and activations of {@code dtype}. */
    List<Row> run(Device device, DType dtype) throws IOException {
        WhisperConfig config = WhisperConfig.load(fixture);
        JsonNode cases = new ObjectMapper().readTree(fixture.resolve("cases.json").toFile());
        int maxNew = cases.get("max_new_tokens").intValue();
        List<Row> rows = new ArrayList<>();
        try (SafetensorsFile ref = SafetensorsFile.open(fixture.resolve("reference.safetensors"));
             WhisperWeights weights = WhisperWeights.load(fixture, config, device, dtype)) {
            Map<String, float[]> clips = Map.of("tone", ref.floats("audio.tone"),
                    "noise", ref.floats("audio.noise"));
            float[] features = ref.floats("features.tone");
            float[] javaFeatures = binMajor(WhisperEngineLoader.logMel(config.numMelBins()).apply(clips.get("tone")),
                    config.numMelBins());
            rows.add(compare("log-mel features (tone, host)", javaFeatures, features, null));
            WhisperModel model = new WhisperModel(weights, dtype);
            rows.add(compare("encoder output (tone)", model.encode(LogMelSpectrogram.framesMajor(features, config.numMelBins())),
                    ref.floats("encoder.tone"), null));

            WhisperEngine engine = new WhisperEngine(model, null, WhisperEngineLoader.logMel(config.numMelBins()),
                    new WhisperEngineOptions(4, 4 * 130 + 1, 16, maxNew), dtype);
            Map<String, Map<Integer, float[]>> seen = new HashMap<>();
            engine.observeLogits((rid, index, logits) ->
                    seen.computeIfAbsent(rid, k -> new HashMap<>()).put(index, logits.clone()));
            Map<String, List<float[]>> wantLogits = new LinkedHashMap<>();
            Map<String, List<Integer>> wantTokens = new LinkedHashMap<>();
            for (JsonNode c : cases.get("cases")) {
                String name = c.get("name").textValue();
                List<float[]> logits = new ArrayList<>();
                List<Integer> tokens = new ArrayList<>();
                for (int w = 0; w < c.get("windows").intValue(); w++) {
                    float[] flat = ref.floats(name + "." + w + ".logits");
                    int steps = (int) ref.info(name + "." + w + ".logits").shape()[0];
                    for (int s = 0; s < steps; s++) {
                        logits.add(java.util.Arrays.copyOfRange(flat, s * config.vocabSize(),
                                (s + 1) * config.vocabSize()));
                    }
                    for (int t : ref.ints(name + "." + w + ".tokens")) {
                        tokens.add(t);
                    }
                }
                wantLogits.put(name, logits);
                wantTokens.put(name, tokens);
                engine.submit(GenerationRequest.builder(name)
                        .audio(new AudioInput(audio(c.get("audio"), clips), c.get("language").isNull() ? null
                                : c.get("language").textValue(), c.get("task").textValue(),
                                c.get("timestamps").booleanValue()))
                        .maxTokens(tokens.size()).build());
            }
            Map<String, List<Integer>> got = new HashMap<>();
            List<String> failures = new ArrayList<>();
            for (int step = 0; engine.hasWork() && step < 1_000; step++) {
                StepResult r = engine.step();
                for (TokenOutput t : r.tokens()) {
                    got.computeIfAbsent(t.requestId(), k -> new ArrayList<>()).add(t.tokenId());
                }
                r.failures().forEach(f -> failures.add(f.requestId() + ": " + f.message()));
            }
            engine.close();
            if (!failures.isEmpty()) {
                throw new IllegalStateException("requests failed: " + failures);
            }
            for (String name : wantTokens.keySet()) {
                List<Integer> want = wantTokens.get(name);
                List<Integer> have = got.getOrDefault(name, List.of());
                int same = 0;
                while (same < Math.min(want.size(), have.size()) && want.get(same).equals(have.get(same))) {
                    same++;
                }
                int compared = Math.min(want.size(), same + 1);
                List<float[]> g = new ArrayList<>();
                List<float[]> w = new ArrayList<>();
                for (int i = 0; i < compared && seen.containsKey(name) && seen.get(name).containsKey(i); i++) {
                    g.add(seen.get(name).get(i));
                    w.add(wantLogits.get(name).get(i));
                }
                String tokens = same == want.size() && have.size() == want.size() ? "identical (" + same + ")"
                        : same + " of " + want.size() + " identical";
                rows.add(compare("logits, " + name + " (" + compared + " positions)", concat(g), concat(w), tokens));
            }
        }
        return rows;
    }

    static String table(String title, List<Row> rows) {
        StringBuilder sb = new StringBuilder("| " + title + " | rel. L2 error | max abs diff | greedy tokens |\n"
                + "|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %s | %.3g | %.3g | %s |%n", r.what(), r.relError(), r.maxAbs(),
                    r.tokens() == null ? "" : r.tokens()));
        }
        return sb.toString();
    }

    private static Row compare(String what, float[] got, float[] want, String tokens) {
        if (got.length != want.length) {
            throw new IllegalStateException(what + ": " + got.length + " values, expected " + want.length);
        }
        double diff = 0;
        double norm = 0;
        double max = 0;
        for (int i = 0; i < got.length; i++) {
            double d = (double) got[i] - want[i];
            diff += d * d;
            norm += (double) want[i] * want[i];
            max = Math.max(max, Double.isNaN(d) ? Double.POSITIVE_INFINITY : Math.abs(d));
        }
        return new Row(what, Math.sqrt(diff / norm), max, tokens);
    }

    private static float[] audio(JsonNode recipe, Map<String, float[]> clips) {
        List<float[]> parts = new ArrayList<>();
        recipe.forEach(a -> parts.add(a.textValue().startsWith("silence:")
                ? new float[Integer.parseInt(a.textValue().substring(8)) * SAMPLE_RATE] : clips.get(a.textValue())));
        return concat(parts);
    }

    private static float[] concat(List<float[]> parts) {
        float[] out = new float[parts.stream().mapToInt(p -> p.length).sum()];
        int at = 0;
        for (float[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    private static float[] binMajor(float[] framesMajor, int bins) {
        int frames = framesMajor.length / bins;
        float[] out = new float[framesMajor.length];
        for (int t = 0; t < frames; t++) {
            for (int m = 0; m < bins; m++) {
                out[m * frames + t] = framesMajor[t * bins + m];
            }
        }
        return out;
    }
}
