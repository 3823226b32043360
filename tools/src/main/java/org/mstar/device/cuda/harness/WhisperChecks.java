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
import org.mstar.engine.WhisperEngine;
import org.mstar.engine.WhisperEngineLoader;
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

    /** What a check reads of the fixture, with its weights loaded on the device being checked. */
    private record Loaded(WhisperConfig config, JsonNode cases, int maxNew, SafetensorsFile ref,
                          WhisperWeights weights) {
        Map<String, float[]> clips() throws IOException {
            return Map.of("tone", ref.floats("audio.tone"), "noise", ref.floats("audio.noise"));
        }
    }

    @FunctionalInterface
    private interface Check {
        List<Row> run(Loaded fixture, List<Row> rows) throws IOException;
    }

    /** Runs {@code check} on the fixture with weights of {@code dtype} on {@code device}; returns its rows. */
    private List<Row> withFixture(Device device, DType dtype, Check check) throws IOException {
        WhisperConfig config = WhisperConfig.load(fixture);
        JsonNode cases = new ObjectMapper().readTree(fixture.resolve("cases.json").toFile());
        try (SafetensorsFile ref = SafetensorsFile.open(fixture.resolve("reference.safetensors"));
             WhisperWeights weights = WhisperWeights.load(fixture, config, device, dtype)) {
            return check.run(new Loaded(config, cases, cases.get("max_new_tokens").intValue(), ref, weights),
                    new ArrayList<>());
        }
    }

    /** Runs everything on {@code device} with weights and activations of {@code dtype}. */
    List<Row> run(Device device, DType dtype) throws IOException {
        return withFixture(device, dtype, (f, rows) -> {
            WhisperConfig config = f.config();
            SafetensorsFile ref = f.ref();
            Map<String, float[]> clips = f.clips();
            float[] features = ref.floats("features.tone");
            float[] javaFeatures = binMajor(WhisperEngineLoader.logMel(config.numMelBins()).apply(clips.get("tone")),
                    config.numMelBins());
            rows.add(compare("log-mel features (tone, host)", javaFeatures, features, null));
            WhisperModel model = new WhisperModel(f.weights(), dtype);
            rows.add(compare("encoder output (tone)", model.encode(LogMelSpectrogram.framesMajor(features, config.numMelBins())),
                    ref.floats("encoder.tone"), null));

            Cases want = cases(f.cases(), ref, config.vocabSize(), clips);
            Transcript got = serve(model, config, dtype, want, f.maxNew(), false);
            for (String name : want.tokens().keySet()) {
                List<Integer> wantTokens = want.tokens().get(name);
                int same = samePrefix(wantTokens, got.tokens().getOrDefault(name, List.of()));
                int compared = Math.min(wantTokens.size(), same + 1);
                List<float[]> g = new ArrayList<>();
                List<float[]> w = new ArrayList<>();
                for (int i = 0; i < compared && got.logits().containsKey(name) && got.logits().get(name).containsKey(i);
                     i++) {
                    g.add(got.logits().get(name).get(i));
                    w.add(want.logits().get(name).get(i));
                }
                rows.add(compare("logits, " + name + " (" + compared + " positions)", concat(g), concat(w),
                        agreement(wantTokens, got.tokens().getOrDefault(name, List.of()))));
            }
            return rows;
        });
    }

    /**
     * Every case served together with decode steps replayed as graphs (pre-planned) against the same engine
     * eager, on {@code device} with weights and activations of {@code dtype}: per case, greedy tokens (must be
     * identical) and the worst logit row's relative L2 error (must be within {@link EngineChecks#GRAPHS_TOLERANCE}),
     * over the positions both runs share a context.
     */
    List<Row> graphsAgainstEager(Device device, DType dtype) throws IOException {
        return withFixture(device, dtype, (f, rows) -> {
            Cases want = cases(f.cases(), f.ref(), f.config().vocabSize(), f.clips());
            WhisperModel model = new WhisperModel(f.weights(), dtype);
            Transcript eager = serve(model, f.config(), dtype, want, f.maxNew(), false);
            Transcript graphs = serve(model, f.config(), dtype, want, f.maxNew(), true);
            if (graphs.replays() == 0) {
                throw new IllegalStateException("no decode step was replayed as a graph");
            }
            for (String name : want.tokens().keySet()) {
                List<Integer> base = eager.tokens().getOrDefault(name, List.of());
                List<Integer> cand = graphs.tokens().getOrDefault(name, List.of());
                int compared = Math.min(base.size(), samePrefix(base, cand) + 1);
                double worst = 0;
                double maxAbs = 0;
                for (int i = 0; i < compared; i++) {
                    Row row = compare("", graphs.logits().get(name).get(i), eager.logits().get(name).get(i), null);
                    worst = Math.max(worst, row.relError());
                    maxAbs = Math.max(maxAbs, row.maxAbs());
                }
                rows.add(new Row("decode graphs vs eager, " + name + " (" + compared + " positions, worst row)", worst,
                        maxAbs, agreement(base, cand)));
            }
            return rows;
        });
    }

    /** transformers' tokens and logits per case, in order, and the requests that transcribe each case's audio. */
    private record Cases(Map<String, List<float[]>> logits, Map<String, List<Integer>> tokens,
                         List<GenerationRequest> requests) {}

    /** One engine's output per request: its tokens, the raw logits of each position, and its graph replays. */
    private record Transcript(Map<String, List<Integer>> tokens, Map<String, Map<Integer, float[]>> logits,
                              long replays) {}

    private static Cases cases(JsonNode cases, SafetensorsFile ref, int vocab, Map<String, float[]> clips)
            throws IOException {
        Map<String, List<float[]>> wantLogits = new LinkedHashMap<>();
        Map<String, List<Integer>> wantTokens = new LinkedHashMap<>();
        List<GenerationRequest> requests = new ArrayList<>();
        for (JsonNode c : cases.get("cases")) {
            String name = c.get("name").textValue();
            List<float[]> logits = new ArrayList<>();
            List<Integer> tokens = new ArrayList<>();
            for (int w = 0; w < c.get("windows").intValue(); w++) {
                float[] flat = ref.floats(name + "." + w + ".logits");
                int steps = (int) ref.info(name + "." + w + ".logits").shape()[0];
                for (int s = 0; s < steps; s++) {
                    logits.add(java.util.Arrays.copyOfRange(flat, s * vocab, (s + 1) * vocab));
                }
                for (int t : ref.ints(name + "." + w + ".tokens")) {
                    tokens.add(t);
                }
            }
            wantLogits.put(name, logits);
            wantTokens.put(name, tokens);
            requests.add(GenerationRequest.builder(name)
                    .audio(new AudioInput(audio(c.get("audio"), clips), c.get("language").isNull() ? null
                            : c.get("language").textValue(), c.get("task").textValue(),
                            c.get("timestamps").booleanValue()))
                    .maxTokens(tokens.size()).build());
        }
        return new Cases(wantLogits, wantTokens, requests);
    }

    /** Serves every case's request together on one engine over {@code model}, eager or with decode graphs. */
    private static Transcript serve(WhisperModel model, WhisperConfig config, DType dtype, Cases cases, int maxNew,
                                    boolean graphs) {
        Map<String, Map<Integer, float[]>> seen = new HashMap<>();
        Map<String, List<Integer>> got = new HashMap<>();
        List<String> failures = new ArrayList<>();
        try (WhisperEngine engine = new WhisperEngine(model, null, WhisperEngineLoader.logMel(config.numMelBins()),
                new WhisperEngineOptions(4, 4 * 130 + 1, 16, maxNew, graphs), dtype)) {
            engine.observeLogits((rid, index, logits) ->
                    seen.computeIfAbsent(rid, k -> new HashMap<>()).put(index, logits.clone()));
            cases.requests().forEach(engine::submit);
            for (int step = 0; engine.hasWork() && step < 1_000; step++) {
                StepResult r = engine.step();
                for (TokenOutput t : r.tokens()) {
                    got.computeIfAbsent(t.requestId(), k -> new ArrayList<>()).add(t.tokenId());
                }
                r.failures().forEach(f -> failures.add(f.requestId() + ": " + f.message()));
            }
            if (!failures.isEmpty()) {
                throw new IllegalStateException("requests failed: " + failures);
            }
            return new Transcript(got, seen, engine.decodeGraphReplays());
        }
    }

    /** Leading tokens two runs share. */
    private static int samePrefix(List<Integer> a, List<Integer> b) {
        int same = 0;
        while (same < Math.min(a.size(), b.size()) && a.get(same).equals(b.get(same))) {
            same++;
        }
        return same;
    }

    private static String agreement(List<Integer> want, List<Integer> have) {
        int same = samePrefix(want, have);
        return same == want.size() && have.size() == want.size() ? "identical (" + same + ")"
                : same + " of " + want.size() + " identical";
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
