package org.mstar.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class WeightQuantizationTest {
    @Test
    void readsTheFlagValuesInAnyCase() {
        assertThat(WeightQuantization.parse("fp8")).isEqualTo(WeightQuantization.FP8);
        assertThat(WeightQuantization.parse(" FP8 ")).isEqualTo(WeightQuantization.FP8);
        assertThat(WeightQuantization.parse("none")).isEqualTo(WeightQuantization.NONE);
        assertThat(WeightQuantization.FP8.flag()).isEqualTo("fp8");
        assertThat(WeightQuantization.parse("FP8-W8A8")).isEqualTo(WeightQuantization.FP8_W8A8);
        assertThat(WeightQuantization.FP8_W8A8.flag()).isEqualTo("fp8-w8a8");
    }

    @Test
    void refusesOtherValuesListingTheAcceptedOnes() {
        assertThatThrownBy(() -> WeightQuantization.parse("int4")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("unknown weight quantization 'int4': expected one of none, fp8, fp8-w8a8");
    }
}
