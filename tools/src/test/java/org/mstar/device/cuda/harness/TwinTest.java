package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** The page order the attention checks and benches draw: fixed by the seed, so their inputs repeat run to run. */
class TwinTest {
    @Test
    void permutationIsTheSeedsShuffleOfEveryIdAndDrawsOncePerSwap() {
        Random rnd = new Random(7);
        assertThat(Twin.permutation(rnd, 10)).containsExactly(0, 1, 9, 3, 7, 4, 8, 5, 2, 6);
        // the shared stream goes on where nine draws left it: later inputs of the same run are unchanged
        assertThat(rnd.nextInt(1000)).isEqualTo(534);
    }

    @Test
    void permutationOfOneOrNoneDrawsNothing() {
        Random rnd = new Random(7);
        assertThat(Twin.permutation(rnd, 0)).isEmpty();
        assertThat(Twin.permutation(rnd, 1)).containsExactly(0);
        assertThat(rnd.nextInt(1000)).isEqualTo(new Random(7).nextInt(1000));
    }
}
