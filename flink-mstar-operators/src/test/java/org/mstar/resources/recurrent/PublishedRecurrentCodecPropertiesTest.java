package org.mstar.resources.recurrent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.mstar.resources.RecurrentLayer;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.Segment;
import org.mstar.resources.StateDType;

/**
 * {@link PublishedRecurrentCodec}: any state and token count come back equal, a cut-short encoding and one of another
 * layout are refused, and a state of the wrong size is not encoded.
 */
class PublishedRecurrentCodecPropertiesTest {
    private static final RecurrentStateSpec SPEC = spec(StateDType.BF16, 4);
    private final PublishedRecurrentCodec codec = new PublishedRecurrentCodec(SPEC);

    private static RecurrentStateSpec spec(StateDType conv, int kernel) {
        return new RecurrentStateSpec("ssm", Set.of("decoder"), Segment.MAIN, List.of(new RecurrentLayer(0, 2, 3, 4,
                5, kernel), new RecurrentLayer(2, 1, 1, 2, 2, 2)), StateDType.F32, conv, 3, 0);
    }

    @Provide
    Arbitrary<byte[]> states() {
        return Arbitraries.bytes().array(byte[].class).ofSize((int) SPEC.stateBytes());
    }

    @Property(tries = 200)
    void anyStateComesBackEqual(@ForAll("states") byte[] state, @ForAll @IntRange(min = 0) int tokens) {
        PublishedRecurrentState info = new PublishedRecurrentState(tokens, state);
        PublishedRecurrentState back = codec.decode(codec.encode(info));
        assertThat(back.tokens()).isEqualTo(tokens);
        assertThat(back.state()).isEqualTo(state);
        assertThat(back.storedLengths()).containsExactly(tokens);
    }

    @Property(tries = 100)
    void aCutShortEncodingIsRefused(@ForAll("states") byte[] state, @ForAll @IntRange(min = 1, max = 1 << 16) int cut) {
        ByteBuffer whole = codec.encode(new PublishedRecurrentState(7, state));
        ByteBuffer shorter = whole.duplicate().limit(whole.limit() - 1 - cut % whole.limit());
        assertThatThrownBy(() -> codec.decode(shorter)).isInstanceOf(IllegalArgumentException.class);
    }

    @Property(tries = 50)
    void anotherLayoutIsRefusedByItsShapes(@ForAll("states") byte[] state) {
        ByteBuffer bytes = codec.encode(new PublishedRecurrentState(3, state));
        for (RecurrentStateSpec other : List.of(spec(StateDType.F32, 4), spec(StateDType.BF16, 3))) {
            assertThatThrownBy(() -> new PublishedRecurrentCodec(other).decode(bytes))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not match");
        }
    }

    @Property(tries = 20)
    void aStateOfAnotherSizeIsNotEncoded(@ForAll @IntRange(min = 0, max = 64) int size) {
        byte[] state = new byte[size == SPEC.stateBytes() ? size + 1 : size];
        assertThatThrownBy(() -> codec.encode(new PublishedRecurrentState(1, state)))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
