package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link PublishedKVCodec} round trip: any publication of this cache's rank (any labels, lengths, reset
 * generations and pages) decodes to the same streams, each carrying exactly the bytes of the pages it named; and no
 * cut-short encoding decodes.
 */
class PublishedKVCodecPropertiesTest {
    private static final int PAGES = 24;
    private static final int PAGE = 4;

    /** One published stream: its label, length, reset generation and a seed for the producer pages it names. */
    record Stream(String label, int seqLen, long resetGeneration, long pageSeed) {}

    @Provide
    Arbitrary<List<Stream>> streams() {
        // multi-byte characters too: the wire counts a label's UTF-8 bytes, not its chars
        Arbitrary<String> labels = Arbitraries.strings().withCharRange('a', 'z').withChars("_/é→")
                .ofMinLength(1).ofMaxLength(12);
        Arbitrary<Stream> one = Combinators.combine(labels,
                Arbitraries.integers().between(0, 6 * PAGE), Arbitraries.longs(), Arbitraries.longs())
                .as(Stream::new);
        return one.list().ofMaxSize(4).uniqueElements(Stream::label);
    }

    /** A cache whose every page holds random bytes, so each page's contents are its own. */
    private static KvHarness randomCache(long seed) {
        KvHarness h = new KvHarness(PAGES, PAGE);
        KvPool pool = h.st().pool;
        byte[] bytes = new byte[PAGES * pool.pageBytes()];
        new Random(seed).nextBytes(bytes);
        pool.scatter(KvHarness.range(0, PAGES), ByteBuffer.wrap(bytes));
        return h;
    }

    private static PublishedKVInfo publication(List<Stream> streams) {
        PublishedKVInfo info = new PublishedKVInfo(1);
        for (Stream s : streams) {
            int[] pages = new Random(s.pageSeed()).ints((s.seqLen() + PAGE - 1) / PAGE, 1, PAGES).toArray();
            info.put(0, s.label(), new KVSequenceInfo(s.seqLen(), "prefill-0", pages, s.resetGeneration()));
        }
        return info;
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    @Property(tries = 60)
    void everyStreamComesBackWithThePagesItNamed(@ForAll("streams") List<Stream> streams, @ForAll long seed) {
        KvHarness cache = randomCache(seed);
        KvPool pool = cache.st().pool;
        PublishedKVInfo info = publication(streams);
        PublishedKVInfo back = cache.kv.codec().decode(cache.kv.codec().encode(info));

        assertThat(back.worldSize()).isEqualTo(1);
        assertThat(back.ranks()).isSubsetOf(0);
        assertThat(back.forRank(0)).containsOnlyKeys(info.forRank(0).keySet());
        for (Map.Entry<String, KVSequenceInfo> e : info.forRank(0).entrySet()) {
            KVSequenceInfo sent = e.getValue();
            KVSequenceInfo got = back.forRank(0).get(e.getKey());
            assertThat(got.seqLen()).isEqualTo(sent.seqLen());
            assertThat(got.resetGeneration()).isEqualTo(sent.resetGeneration());
            int[] pages = sent.pageIndices();
            assertThat(got.carried().numPages()).isEqualTo(pages.length);
            assertThat(bytes(got.carried().pages(0, pages.length))).isEqualTo(pool.gather(pages));
            if (pages.length > 1) {
                // the tail a reader whose prefix cache holds the first page takes
                assertThat(bytes(got.carried().pages(1, pages.length)))
                        .isEqualTo(pool.gather(Arrays.copyOfRange(pages, 1, pages.length)));
            }
        }
        assertThat(back.storedLengths().sorted().toArray())
                .isEqualTo(streams.stream().mapToInt(Stream::seqLen).sorted().toArray());
        cache.kv.cleanup();
    }

    @Property(tries = 40)
    void aCutShortEncodingIsRefusedByName(@ForAll("streams") List<Stream> streams, @ForAll long seed,
                                          @ForAll @IntRange(min = 1, max = 1 << 20) int cut) {
        KvHarness cache = randomCache(seed);
        ByteBuffer whole = cache.kv.codec().encode(publication(streams));
        ByteBuffer shorter = whole.duplicate().limit(whole.limit() - 1 - cut % whole.limit());
        assertThatThrownBy(() -> cache.kv.codec().decode(shorter)).isInstanceOf(IllegalArgumentException.class);
        cache.kv.cleanup();
    }
}
