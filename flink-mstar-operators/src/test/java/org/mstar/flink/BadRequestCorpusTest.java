package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.mstar.device.DType;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.StepResult;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.CheckpointWriter;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.GenerateRequest;

/**
 * Bad requests against the real engine (a small random Llama on the CPU, built by the production factory), with
 * the fake engine that operator tests use held to the same answers on the cases it covers: each is refused as a
 * client's mistake naming the same field, and the engine goes on serving a good request afterwards.
 */
class BadRequestCorpusTest {
    private static final RequestConverter CONVERTER = GenerateSettings.from(new Configuration()).converter();
    private static final ModelConfig MODEL = ModelConfig.builder(Architecture.LLAMA)
            .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16)
            .ropeTheta(10_000).maxPositionEmbeddings(256).vocabSize(320).bosTokenId(0).eosTokenId(1)
            .dtype(DType.F32).build();

    @TempDir
    static Path dir;
    private static GenerationEngine llama;
    private static GenerationEngine fake;

    @BeforeAll
    static void engines() throws Exception {
        CheckpointWriter.writeRandom(MODEL, DType.F32, 11, dir);
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, dir.toString());
        conf.set(LlamaEngineOptions.PAGES, 9); // 8 usable pages of 16: fewer tokens than the context
        llama = new LlamaEngineFactory(conf).create("cpu", 0);
        fake = new FakeEngineFactory(2, java.time.Duration.ZERO).create("cpu", 0);
    }

    @AfterAll
    static void close() {
        llama.close();
        fake.close();
    }

    /** (case, change to a good request, field named in the refusal, whether the fake engine covers it). */
    static Stream<Arguments> corpus() {
        return Stream.of(
                bad("no prompt", r -> r.setPrompt(null), "prompt", true),
                bad("empty prompt", r -> r.setPrompt(""), "prompt", true),
                bad("both prompts", r -> r.setPromptTokenIds(List.of(5, 6)), "prompt", true),
                bad("negative max_tokens", r -> r.setMaxTokens(-3), "max_tokens", true),
                bad("min_tokens over max_tokens", r -> r.setMinTokens(50), "min_tokens", true),
                bad("NaN temperature", r -> r.setTemperature(Double.NaN), "temperature", true),
                bad("negative top_p", r -> r.setTopP(-0.5), "top_p", true),
                bad("unknown sampling option", r -> r.setSamplingOptions(java.util.Map.of("beam_width", "4")),
                        "sampling_options", true),
                bad("prompt over the context", r -> r.setPrompt("word ".repeat(600)), "prompt", true),
                bad("prompt id outside the vocabulary", r -> {
                    r.setPrompt(null);
                    r.setPromptTokenIds(List.of(5, 5_000));
                }, "prompt_token_ids", true),
                bad("negative prompt id", r -> {
                    r.setPrompt(null);
                    r.setPromptTokenIds(List.of(5, -1));
                }, "prompt_token_ids", true),
                bad("stop id outside the vocabulary", r -> {
                    r.setMinTokens(4);
                    r.setStopTokenIds(List.of(999_999));
                }, "stop_token_ids", true),
                bad("negative stop id", r -> r.setStopTokenIds(List.of(-2)), "stop_token_ids", true),
                bad("more tokens than the KV pool holds", r -> r.setMaxTokens(100_000), "max_tokens", false),
                bad("audio for a text model", r -> {
                    r.setPrompt(null);
                    r.setAudio(org.mstar.schemas.Audio.newBuilder().setWav(java.nio.ByteBuffer.wrap(
                            org.mstar.model.whisper.audio.TestWavs.tone(0.5, 440, 16_000))).build());
                }, "audio", false));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("corpus")
    void theRealEngineRefusesItNamingTheFieldAndTheFakeAgrees(String name, Consumer<GenerateRequest> change,
                                                              String field, boolean fakeCovers) {
        GenerateRequest request = TestRequests.request("bad", 3);
        change.accept(request);

        assertThat(refusal(llama, request)).as("real engine").isNotNull().startsWith(field);
        if (fakeCovers) {
            assertThat(refusal(fake, request)).as("fake engine").isNotNull().startsWith(field);
        }
    }

    @Test
    void afterTheWholeCorpusTheRealEngineServesAGoodRequest() {
        corpus().forEach(a -> {
            GenerateRequest request = TestRequests.request("bad", 3);
            @SuppressWarnings("unchecked")
            Consumer<GenerateRequest> change = (Consumer<GenerateRequest>) a.get()[1];
            change.accept(request);
            refusal(llama, request);
        });
        GenerateRequest good = TestRequests.request("good", 3);
        llama.submit(CONVERTER.convert(good));
        int tokens = 0;
        boolean finished = false;
        while (llama.hasWork()) {
            StepResult r = llama.step();
            assertThat(r.failures()).isEmpty();
            tokens += r.tokens().size();
            finished |= !r.finished().isEmpty();
        }
        assertThat(finished).isTrue();
        assertThat(tokens).isPositive();
    }

    /** The refused field and message, or null when the request was accepted (it is then removed again). */
    private static String refusal(GenerationEngine engine, GenerateRequest request) {
        Throwable t = catchThrowable(() -> engine.submit(CONVERTER.convert(request)));
        if (t == null) {
            engine.remove(request.getRequestId().toString());
            return null;
        }
        assertThat(t).isInstanceOf(RequestValidationException.class);
        return t.getMessage();
    }

    private static Arguments bad(String name, Consumer<GenerateRequest> change, String field, boolean fakeCovers) {
        return Arguments.of(name, change, field, fakeCovers);
    }
}
