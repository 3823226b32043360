package org.mstar.engine.whisper;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.engine.AudioInput;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.engine.WhisperEngine;
import org.mstar.engine.WhisperEngineLoader;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;
import org.mstar.model.whisper.WhisperWeights;
import org.mstar.resources.RequestValidationException;

/**
 * The Whisper engine on the CPU (fp32) against transformers' {@code WhisperForConditionalGeneration} on a tiny random
 * checkpoint ({@link WhisperFixture}): the encoder's output, the raw logits of every generated position within
 * 1e-4 of transformers', and the greedy tokens identical, with the requests alone and batched together, after
 * a resume in the middle of a transcription, and with decode steps replayed as graphs.
 */
class WhisperFidelityTest extends CpuWhisperTest {
    private static final float TOLERANCE = 1e-4f;

    /** Stands in for the feature extractor on the tone: transformers' own features of it. */
    private static Function<float[], float[]> toneFeatures() {
        float[] tone = fixture.clips.get("tone");
        float[] features = fixture.toneFeaturesFramesMajor();
        return samples -> {
            assertThat(samples).as("only the tone has stored features").containsExactly(tone);
            return features;
        };
    }

    private static WhisperEngine engine(Function<float[], float[]> features, int maxWindowTokens) {
        return engine(features, maxWindowTokens, false);
    }

    private static WhisperEngine engine(Function<float[], float[]> features, int maxWindowTokens,
                                        boolean decodeGraphs) {
        return WhisperEngineLoader.load(fixture.folder, cpu, features,
                new WhisperEngineOptions(4, 4 * 130 + 1, 16, maxWindowTokens, decodeGraphs));
    }

    private static GenerationRequest request(String id, WhisperFixture.Case c, int maxTokens) {
        return GenerationRequest.builder(id)
                .audio(new AudioInput(fixture.audio(c), c.language(), c.task(), c.timestamps())).maxTokens(maxTokens)
                .build();
    }

    @Test
    void encoderOutputMatchesTransformers() throws Exception {
        WhisperConfig config = WhisperConfig.load(fixture.folder);
        try (WhisperWeights weights = WhisperWeights.load(fixture.folder, config, cpu, DType.F32)) {
            float[] encoded = new WhisperModel(weights, DType.F32).encode(fixture.toneFeaturesFramesMajor());
            assertThat(encoded).hasSameSizeAs(fixture.toneEncoded);
            float worst = maxAbsDiff(encoded, fixture.toneEncoded);
            System.out.printf("whisper encoder: largest |output - transformers'| %.3g%n", worst);
            assertThat(worst).isLessThanOrEqualTo(TOLERANCE);
        }
    }

    @Test
    void toneCasesAloneAndBatchedMatchTransformers() {
        List<WhisperFixture.Case> cases = List.of(fixture.find("transcribe_en"), fixture.find("translate_de_timestamps"));
        for (WhisperFixture.Case c : cases) {
            transcribeAndCheck(List.of(c), toneFeatures(), 0);
        }
        transcribeAndCheck(cases, toneFeatures(), 0);
    }

    /**
     * Every case with the Java feature extractor: language detection on noise, and 34 s of audio in two windows of
     * at most 20 tokens, the second prompted with the first's; alone, then all four batched.
     */
    @Test
    void allCasesWithTheFeatureExtractorMatchTransformers() {
        for (WhisperFixture.Case c : fixture.cases) {
            transcribeAndCheck(List.of(c), null, fixture.maxNewTokens);
        }
        transcribeAndCheck(fixture.cases, null, fixture.maxNewTokens);
    }

    /**
     * Decode steps replayed as recorded graphs read their positions, KV addresses and attention plans from the
     * buffers the resources plan into (on the CPU a replay re-runs the recorded forward): every case batched,
     * transformers' logits and tokens all the same.
     */
    @Test
    void withDecodeGraphsEveryCaseStillMatchesTransformers() {
        long replays = transcribeAndCheck(fixture.cases, null, fixture.maxNewTokens, true);
        assertThat(replays).as("decode steps replayed as graphs").isPositive();
    }

    /** A resume inside the second window of the long audio and one right after language detection. */
    @Test
    void resumedAcrossWindowsAndAfterDetectionContinuesIdentically() {
        for (String name : List.of("long_en", "detect")) {
            WhisperFixture.Case c = fixture.find(name);
            int[] expected = c.output();
            int done = name.equals("long_en") ? fixture.maxNewTokens + 5 : 1;
            try (WhisperEngine engine = engine(null, fixture.maxNewTokens)) {
                engine.resume(request("r", c, expected.length), Arrays.copyOf(expected, done));
                Drained out = drain(engine);
                assertThat(out.tokens.get("r")).as(name).containsExactlyElementsOf(tail(expected, done));
                assertThat(out.finished.get("r").tokenIds()).as(name).containsExactly(expected);
            }
        }
    }

    @Test
    void resumedMidTranscriptionContinuesIdentically() {
        WhisperFixture.Case c = fixture.find("translate_de_timestamps");
        int[] expected = c.output();
        try (WhisperEngine engine = engine(toneFeatures(), 0)) {
            engine.resume(request("r", c, fixture.maxNewTokens), Arrays.copyOf(expected, 7));
            Drained out = drain(engine);
            assertThat(out.tokens.get("r")).containsExactlyElementsOf(tail(expected, 7));
            assertThat(out.finished.get("r").tokenIds()).containsExactly(expected);
        }
    }

    /**
     * Whisper's control tokens are added special tokens of tokenizer.json: they encode to their ids and are left out of
     * the text, while timestamps (not special in this checkpoint, as in openai's) stay in it.
     */
    @Test
    void theTextSkipsControlTokensAndKeepsTimestamps() throws Exception {
        try (TextTokenizer tokenizer = TextTokenizer.load(fixture.folder)) {
            assertThat(tokenizer.encode("<|startoftranscript|><|en|><|transcribe|><|notimestamps|>", false))
                    .containsExactly(321, 322, 329, 333);
            assertThat(tokenizer.decode(new int[] {321, 322, 329, 333, 320})).isEmpty();
        }
        WhisperFixture.Case c = fixture.find("translate_de_timestamps");
        try (WhisperEngine engine = engine(toneFeatures(), 0)) {
            engine.submit(request("t", c, fixture.maxNewTokens));
            FinishedRequest done = drain(engine).finished.get("t");
            assertThat(done.tokenIds()).containsExactly(c.output());
            // the first token is the timestamp <|0.18|>, then text
            assertThat(done.text()).startsWith("<|0.18|>").doesNotContain("<|endoftext|>").hasSizeGreaterThan(8);
        }
    }

    /** A request whose step throws fails alone with a 500; the one batched with it still gets transformers' tokens. */
    @Test
    void aFailingRequestFailsAloneAndTheOthersCarryOn() {
        WhisperFixture.Case tone = fixture.find("transcribe_en");
        WhisperFixture.Case noise = fixture.find("detect");
        Function<float[], float[]> features = toneFeatures();
        Function<float[], float[]> failingOnNoise = samples -> {
            if (samples.length == fixture.clips.get("noise").length) {
                throw new IllegalStateException("no features for this audio");
            }
            return features.apply(samples);
        };
        try (WhisperEngine engine = engine(failingOnNoise, 0)) {
            engine.submit(request("tone", tone, tone.output().length));
            engine.submit(request("noise", noise, noise.output().length));
            Drained out = drain(engine);
            assertThat(out.failures).singleElement().asString().startsWith("noise: serving this request failed")
                    .contains("no features for this audio");
            assertThat(out.tokens.get("tone")).containsExactlyElementsOf(Arrays.stream(tone.output()).boxed().toList());
        }
    }

    @Test
    void requestsThatCannotBeTranscribedAreRefusedNamingTheField() {
        WhisperFixture.Case c = fixture.find("transcribe_en");
        try (WhisperEngine engine = engine(toneFeatures(), 0)) {
            assertThatThrownBy(() -> engine.submit(GenerationRequest.builder("t").promptText("hello").maxTokens(5)
                    .build())).isInstanceOf(RequestValidationException.class).hasMessageStartingWith("audio:");
            assertThatThrownBy(() -> engine.submit(GenerationRequest.builder("t").promptTokenIds(new int[] {1})
                    .audio(new AudioInput(fixture.audio(c), "en", "transcribe", false)).maxTokens(5).build()))
                    .isInstanceOf(RequestValidationException.class).hasMessageStartingWith("prompt:");
            assertThatThrownBy(() -> engine.submit(GenerationRequest.builder("t")
                    .audio(new AudioInput(fixture.audio(c), "xx", "transcribe", false)).maxTokens(5).build()))
                    .isInstanceOf(RequestValidationException.class).hasMessageStartingWith("audio.language:")
                    .hasMessageContaining("en");
            assertThatThrownBy(() -> engine.submit(GenerationRequest.builder("t")
                    .audio(new AudioInput(fixture.audio(c), "en", "summarise", false)).maxTokens(5).build()))
                    .isInstanceOf(RequestValidationException.class).hasMessageStartingWith("audio.task:");
            assertThatThrownBy(() -> engine.submit(GenerationRequest.builder("t")
                    .audio(new AudioInput(new float[0], "en", "transcribe", false)).maxTokens(5).build()))
                    .isInstanceOf(RequestValidationException.class).hasMessageStartingWith("audio.samples:");
            assertThat(engine.hasWork()).isFalse();
        }
    }

    /** Runs the cases together and checks each one's logits and tokens against transformers'. */
    static void transcribeAndCheck(List<WhisperFixture.Case> cases, Function<float[], float[]> features,
                                   int maxWindowTokens) {
        transcribeAndCheck(cases, features, maxWindowTokens, false);
    }

    /** {@link #transcribeAndCheck(List, Function, int)}; returns the decode steps replayed as graphs. */
    static long transcribeAndCheck(List<WhisperFixture.Case> cases, Function<float[], float[]> features,
                                   int maxWindowTokens, boolean decodeGraphs) {
        Map<String, Map<Integer, float[]>> seen = new HashMap<>();
        try (WhisperEngine engine = engine(features, maxWindowTokens, decodeGraphs)) {
            engine.observeLogits((rid, index, logits) ->
                    seen.computeIfAbsent(rid, k -> new HashMap<>()).put(index, logits.clone()));
            for (WhisperFixture.Case c : cases) {
                int total = c.output().length;
                engine.submit(request(c.name(), c, total));
            }
            Drained out = drain(engine);
            assertThat(out.failures).isEmpty();
            for (WhisperFixture.Case c : cases) {
                float worst = 0;
                int index = 0;
                for (WhisperFixture.Window w : c.windows()) {
                    for (int i = 0; i < w.tokens().length; i++, index++) {
                        float diff = maxAbsDiff(seen.get(c.name()).get(index), w.logits()[i]);
                        worst = Math.max(worst, diff);
                        assertThat(diff).as("%s logits of output token %d", c.name(), index)
                                .isLessThanOrEqualTo(TOLERANCE);
                    }
                }
                assertThat(out.tokens.get(c.name())).as("%s greedy tokens", c.name())
                        .containsExactlyElementsOf(Arrays.stream(c.output()).boxed().toList());
                System.out.printf("whisper %s (batch of %d): largest |logit - transformers'| %.3g%n", c.name(),
                        cases.size(), worst);
            }
            return engine.decodeGraphReplays();
        }
    }

    record Drained(Map<String, List<Integer>> tokens, Map<String, FinishedRequest> finished, List<String> failures) {}

    /** Steps until nothing is live; each request's token indexes must follow on from its first one. */
    static Drained drain(WhisperEngine engine) {
        Drained out = new Drained(new HashMap<>(), new HashMap<>(), new ArrayList<>());
        Map<String, Integer> nextIndex = new HashMap<>();
        for (int step = 0; engine.hasWork(); step++) {
            assertThat(step).as("steps to drain").isLessThan(2_000);
            StepResult r = engine.step();
            for (TokenOutput t : r.tokens()) {
                Integer next = nextIndex.put(t.requestId(), t.index() + 1);
                if (next != null) {
                    assertThat(t.index()).as("index of %s's token", t.requestId()).isEqualTo(next);
                }
                out.tokens.computeIfAbsent(t.requestId(), k -> new ArrayList<>()).add(t.tokenId());
            }
            r.finished().forEach(f -> out.finished.put(f.requestId(), f));
            r.failures().forEach(f -> out.failures.add(f.requestId() + ": " + f.message()));
        }
        return out;
    }

    private static List<Integer> tail(int[] a, int from) {
        return Arrays.stream(a, from, a.length).boxed().toList();
    }

    static float maxAbsDiff(float[] a, float[] b) {
        assertThat(a).hasSameSizeAs(b);
        float max = 0;
        for (int i = 0; i < a.length; i++) {
            max = Math.max(max, Math.abs(a[i] - b[i]));
        }
        return max;
    }
}
