package org.mstar.model.whisper.audio;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

class MelFilterBankTest {
    @Test
    void slaneyScaleIsLinearBelowOneKilohertzAndLogarithmicAbove() {
        assertThat(MelFilterBank.hzToMel(600)).isCloseTo(9.0, within(1e-12));
        assertThat(MelFilterBank.hzToMel(1000)).isCloseTo(15.0, within(1e-12));
        assertThat(MelFilterBank.hzToMel(6400)).isCloseTo(42.0, within(1e-12));
        for (double hz : new double[] {0, 123, 999, 1000, 4321, 8000}) {
            assertThat(MelFilterBank.melToHz(MelFilterBank.hzToMel(hz))).isCloseTo(hz, within(1e-9));
        }
    }
}
