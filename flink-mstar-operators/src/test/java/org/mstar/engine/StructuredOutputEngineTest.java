package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.constraint.OutputConstraint;

/** Constrained generation through the engine on the tiny random model with its byte-level tokenizer. */
class StructuredOutputEngineTest {
    @TempDir
    static Path tmp;
    private static Path model;
    private static CpuDevice cpu;
    private static TextTokenizer tokenizer;

    @BeforeAll
    static void write() throws Exception {
        model = StructuredOutputModel.write(tmp, 5);
        cpu = new CpuDevice(2);
        tokenizer = TextTokenizer.load(model);
    }

    @AfterAll
    static void close() {
        tokenizer.close();
        cpu.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"\\d{3}-\\d{4}", "(yes|no|maybe)", "[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8}){0,2}", "é+€?",
            "(ab)+", "\\{\"n\":-?\\d{1,4}\\}", "[^\\n]{2,5}\\."})
    void outputsMatchTheRegexAtTemperatureOne(String regex) {
        try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 4)) {
            for (int seed = 0; seed < 8; seed++) {
                engine.submit(StructuredOutputModel.request("r" + seed, "Say:", 1.0, seed, 200,
                        OutputConstraint.regex(regex)));
            }
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 2000);
            assertThat(driver.failures).isEmpty();
            assertThat(driver.finished).hasSize(8);
            driver.finished.values().forEach(f -> {
                assertThat(f.finish()).isEqualTo(FinishReason.STOP);
                assertThat(Pattern.matches(regex, f.text())).as("'%s' matches %s", f.text(), regex).isTrue();
            });
        }
    }

    @Test
    void greedyPicksTheUnconstrainedChoiceWheneverTheConstraintAllowsIt() {
        // printable ASCII only: the model's own argmax is sometimes allowed, sometimes not
        byte[][] table = tokenBytes();
        List<float[]> logits = new java.util.ArrayList<>();
        List<Integer> tokens;
        try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 2)) {
            engine.observeLogits((rid, index, l) -> logits.add(l));
            engine.submit(StructuredOutputModel.request("g", "Once upon a time", 0.0, 0, 40,
                    OutputConstraint.regex("[ -~]*")));
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 100);
            tokens = driver.tokens.get("g");
        }
        int same = 0;
        int masked = 0;
        for (int i = 0; i < tokens.size(); i++) {
            float[] l = logits.get(i);
            int free = argmax(l, id -> true);
            int allowedBest = argmax(l, id -> id == 1 || printable(table[id]));
            assertThat(tokens.get(i)).as("step %d", i).isEqualTo(allowedBest);
            if (free == allowedBest) {
                same++;
            } else {
                masked++;
            }
        }
        assertThat(same).as("steps where the unconstrained choice was allowed and kept").isPositive();
        assertThat(masked).as("steps where the constraint changed the choice").isPositive();
    }

    private static int argmax(float[] l, java.util.function.IntPredicate allowed) {
        int best = -1;
        for (int v = 0; v < l.length; v++) {
            if (allowed.test(v) && (best < 0 || l[v] > l[best])) {
                best = v;
            }
        }
        return best;
    }

    private static boolean printable(byte[] b) {
        if (b == null) {
            return false;
        }
        for (byte x : b) {
            if (x < 0x20 || x > 0x7E) {
                return false;
            }
        }
        return true;
    }

    @Test
    void anUnconstrainedRowSharingTheBatchSamplesAsAlone() {
        GenerationRequest free = StructuredOutputModel.request("free", "Hello", 1.0, 3, 20, null);
        List<Integer> alone = generate(free);
        try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 4)) {
            engine.submit(StructuredOutputModel.request("json", "Hello", 1.0, 3, 200,
                    OutputConstraint.jsonSchema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":4}")));
            engine.submit(free);
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 500);
            assertThat(driver.tokens.get("free")).isEqualTo(alone);
            assertThat(driver.finished.get("json").text()).matches("\\[(-?\\d+(,-?\\d+)*)?\\]");
        }
    }

    @Test
    void aResumedRequestReplaysItsTokensThroughTheAutomaton() {
        OutputConstraint schema = OutputConstraint.jsonSchema("""
                {"type":"object","properties":{"name":{"type":"string","maxLength":8},
                 "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":5}},"required":["name","tags"]}""");
        GenerationRequest request = StructuredOutputModel.request("r", "Record:", 1.0, 42, 300, schema);
        List<Integer> whole = generate(request);
        assertThat(whole.size()).isGreaterThan(6);
        for (int cut : new int[] {1, whole.size() / 2, whole.size() - 1}) {
            int[] prefix = whole.subList(0, cut).stream().mapToInt(Integer::intValue).toArray();
            try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 2)) {
                engine.resume(request, prefix);
                EngineDriver driver = new EngineDriver();
                driver.drain(engine, 500);
                assertThat(driver.tokens.get("r")).as("after a restore at %d", cut)
                        .isEqualTo(whole.subList(cut, whole.size()));
            }
        }
    }

    @Test
    void choicesEndWhenComplete() {
        try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 4)) {
            for (int seed = 0; seed < 6; seed++) {
                engine.submit(StructuredOutputModel.request("r" + seed, "Is it?", 1.0, seed, 50,
                        OutputConstraint.choice(List.of("positive", "negative", "neutral"))));
            }
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 500);
            driver.finished.values().forEach(f -> {
                assertThat(f.text()).isIn("positive", "negative", "neutral");
                assertThat(f.finish()).isEqualTo(FinishReason.STOP);
                assertThat(f.tokenIds()).doesNotContain(1); // complete before an end token was needed
            });
        }
    }

    @Test
    void invalidConstraintsAreRefusedNamingTheProblem() {
        try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 2)) {
            assertThatThrownBy(() -> engine.submit(StructuredOutputModel.request("a", "x", 1.0, 0, 10,
                    OutputConstraint.jsonSchema("{\"type\":\"string\",\"format\":\"date\"}"))))
                    .isInstanceOf(RequestValidationException.class).hasMessageContaining("'format'");
            assertThatThrownBy(() -> engine.submit(StructuredOutputModel.request("b", "x", 1.0, 0, 10,
                    OutputConstraint.regex("(a)\\1"))))
                    .isInstanceOf(RequestValidationException.class).hasMessageStartingWith("regex:");
            GenerationRequest ignoring = GenerationRequest.builder("c").promptText("x").maxTokens(10).ignoreEos(true)
                    .constraint(OutputConstraint.regex("a+")).build();
            assertThatThrownBy(() -> engine.submit(ignoring))
                    .isInstanceOf(RequestValidationException.class).hasMessageContaining("ignore_eos");
            assertThat(engine.hasWork()).isFalse();
        }
    }

    private List<Integer> generate(GenerationRequest request) {
        try (LlamaEngine engine = StructuredOutputModel.engine(model, cpu, 2)) {
            engine.submit(request);
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 1000);
            assertThat(driver.failures).isEmpty();
            return driver.tokens.get(request.requestId());
        }
    }

    private static byte[][] tokenBytes() {
        try {
            return tokenizer.tokenBytes(StructuredOutputModel.CONFIG.vocabSize());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
