package org.mstar.resources.position;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/** {@link PublishedPositionCodec} round trip over any labels and positions, and refusal of a cut-short encoding. */
class PublishedPositionCodecPropertiesTest {
    private final PublishedPositionCodec codec = new PublishedPositionCodec();

    @Provide
    Arbitrary<Map<String, Integer>> counters() {
        // multi-byte characters too: the wire counts a label's UTF-8 bytes, not its chars
        return Arbitraries.maps(Arbitraries.strings().withCharRange('a', 'z').withChars("_/é→").ofMaxLength(10),
                Arbitraries.integers()).ofMaxSize(8);
    }

    @Property(tries = 200)
    void anyCountersComeBackEqual(@ForAll("counters") Map<String, Integer> counters) {
        PublishedPositionInfo back = codec.decode(codec.encode(new PublishedPositionInfo(counters)));
        assertThat(back.counters()).isEqualTo(counters);
    }

    @Property(tries = 200)
    void aCutShortEncodingIsRefusedByName(@ForAll("counters") Map<String, Integer> counters,
                                          @ForAll @IntRange(min = 1, max = 1 << 16) int cut) {
        ByteBuffer whole = codec.encode(new PublishedPositionInfo(counters));
        ByteBuffer shorter = whole.duplicate().limit(whole.limit() - 1 - cut % whole.limit());
        assertThatThrownBy(() -> codec.decode(shorter)).isInstanceOf(IllegalArgumentException.class);
    }
}
