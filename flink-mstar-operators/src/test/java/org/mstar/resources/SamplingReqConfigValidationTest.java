package org.mstar.resources;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.List;
import java.util.Set;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.params.provider.Arguments.arguments;

/** SamplingReqConfig.validate: ranges and node capabilities (spec §7.4; invariant 15). */
class SamplingReqConfigValidationTest {
    /** Every capability on. */
    private static final SamplerSpec CAPABLE =
            new SamplerSpec("sampler", Set.of("decoder"), 1000, true, true, 64, List.of(2), true);
    /** Penalty only, as the short constructor declares. */
    private static final SamplerSpec PLAIN = new SamplerSpec("sampler", Set.of("decoder"), 1000);

    /** A mutable copy of the record's fields, so each case changes one. */
    private static final class Knobs {
        double temperature = 0.6;
        int topK;
        double topP = 1.0;
        double repetitionPenalty = 1.0;
        double minP;
        int repetitionWindow;
        int minTokens;
        boolean topPFirst;
        int topPMinKeep = 1;

        SamplingReqConfig build() {
            return new SamplingReqConfig(temperature, topK, topP, false, repetitionPenalty, minP, repetitionWindow,
                    minTokens, topPFirst, topPMinKeep, true, 0L);
        }
    }

    private static SamplingReqConfig with(UnaryOperator<Knobs> change) {
        return change.apply(new Knobs()).build();
    }

    static Stream<Arguments> outOfRange() {
        return Stream.of(
                arguments("temperature", with(k -> { k.temperature = -0.1; return k; })),
                arguments("temperature", with(k -> { k.temperature = Double.NaN; return k; })),
                arguments("temperature", with(k -> { k.temperature = Double.POSITIVE_INFINITY; return k; })),
                arguments("top_p", with(k -> { k.topP = 0.0; return k; })),
                arguments("top_p", with(k -> { k.topP = 1.01; return k; })),
                arguments("top_p", with(k -> { k.topP = Double.NaN; return k; })),
                arguments("min_p", with(k -> { k.minP = -0.01; return k; })),
                arguments("min_p", with(k -> { k.minP = 1.5; return k; })),
                arguments("min_p", with(k -> { k.minP = Double.NaN; return k; })),
                arguments("repetition_penalty", with(k -> { k.repetitionPenalty = 0.0; return k; })),
                arguments("repetition_penalty", with(k -> { k.repetitionPenalty = -1.2; return k; })),
                arguments("repetition_penalty", with(k -> { k.repetitionPenalty = Double.NaN; return k; })),
                arguments("top_k", with(k -> { k.topK = -1; return k; })),
                arguments("top_k", with(k -> { k.topK = 1001; return k; })),
                arguments("repetition_window", with(k -> { k.repetitionWindow = -1; return k; })),
                arguments("min_tokens", with(k -> { k.minTokens = -1; return k; })),
                arguments("top_p_min_keep", with(k -> { k.topPMinKeep = 0; return k; })));
    }

    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("outOfRange")
    void anOutOfRangeValueIsRefusedByField(String field, SamplingReqConfig cfg) {
        assertThatThrownBy(() -> cfg.validate(CAPABLE))
                .isInstanceOfSatisfying(RequestValidationException.class,
                        e -> assertThat(e.field()).isEqualTo(field));
    }

    static Stream<Arguments> missingCapability() {
        return Stream.of(
                arguments("min_p", with(k -> { k.minP = 0.05; return k; })),
                arguments("repetition_window", with(k -> { k.repetitionWindow = 8; return k; })),
                arguments("min_tokens", with(k -> { k.minTokens = 4; return k; })),
                arguments("top_p_first", with(k -> { k.topPFirst = true; return k; })),
                arguments("top_p_min_keep", with(k -> { k.topPMinKeep = 3; return k; })));
    }

    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("missingCapability")
    void aParameterTheNodeCannotHonourIsRefusedByField(String field, SamplingReqConfig cfg) {
        assertThatCode(() -> cfg.validate(CAPABLE)).doesNotThrowAnyException();
        assertThatThrownBy(() -> cfg.validate(PLAIN))
                .isInstanceOfSatisfying(RequestValidationException.class,
                        e -> assertThat(e.field()).isEqualTo(field));
    }

    @Test
    void aRepetitionPenaltyNeedsTheNodeToEnableIt() {
        SamplerSpec noPenalty = new SamplerSpec("sampler", Set.of("decoder"), 1000, false, true, 64, List.of(2), true);
        SamplingReqConfig penalised = with(k -> { k.repetitionPenalty = 1.1; return k; });

        assertThatCode(() -> penalised.validate(CAPABLE)).doesNotThrowAnyException();
        assertThatThrownBy(() -> penalised.validate(noPenalty))
                .isInstanceOfSatisfying(RequestValidationException.class,
                        e -> assertThat(e.field()).isEqualTo("repetition_penalty"));
        assertThatCode(() -> SamplingReqConfig.DEFAULTS.validate(noPenalty)).doesNotThrowAnyException();
    }

    @Test
    void defaultsAndGreedyAreValidOnAPlainNode() {
        assertThatCode(() -> SamplingReqConfig.DEFAULTS.validate(PLAIN)).doesNotThrowAnyException();
        assertThatCode(() -> SamplingReqConfig.greedy().validate(PLAIN)).doesNotThrowAnyException();
        assertThatCode(() -> SamplingReqConfig.DEFAULTS.validate(null)).doesNotThrowAnyException();
    }
}
