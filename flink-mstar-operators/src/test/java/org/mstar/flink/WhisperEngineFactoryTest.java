package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.InstantiationUtil;
import org.junit.jupiter.api.Test;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.resources.RequestValidationException;

/**
 * A job that names a Whisper folder gets a Whisper engine from the default factory: audio in, transformers' greedy
 * tokens out (the tiny checkpoint's "transcribe_en" case); a text request to it is a 400.
 */
class WhisperEngineFactoryTest {
    private static final Path FIXTURE = Path.of("src/test/resources/org/mstar/model/fixtures/whisper");

    @Test
    void theDefaultFactoryServesAWhisperFolderWithTheWhisperEngine() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, FIXTURE.toString());
        conf.set(LlamaEngineOptions.PAGES, 2 * 122 + 1);
        EngineFactory factory = InstantiationUtil.clone(new LlamaEngineFactory(conf));
        float[] tone;
        int[] expected;
        try (SafetensorsFile ref = SafetensorsFile.open(FIXTURE.resolve("reference.safetensors"))) {
            var fb = ref.bytes("audio.tone").order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
            tone = new float[fb.remaining()];
            fb.get(tone);
            var ib = ref.bytes("transcribe_en.0.tokens").order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            expected = new int[ib.remaining()];
            ib.get(expected);
        }
        try (GenerationEngine engine = factory.create("cpu", 0)) {
            assertThatThrownBy(() -> engine.submit(new GenerationRequest("text", null, "hello", null, 5, 0, List.of(),
                    false, 0))).isInstanceOf(RequestValidationException.class).hasMessageStartingWith("audio:");
            engine.submit(new GenerationRequest("speech", null, null, null, expected.length, 0, List.of(), false, 0,
                    null, null, new AudioInput(tone, "en", "transcribe", false)));
            List<Integer> tokens = new ArrayList<>();
            while (engine.hasWork()) {
                StepResult r = engine.step();
                assertThat(r.failures()).isEmpty();
                r.tokens().stream().map(TokenOutput::tokenId).forEach(tokens::add);
            }
            assertThat(tokens).containsExactly(java.util.Arrays.stream(expected).boxed().toArray(Integer[]::new));
        }
    }
}
