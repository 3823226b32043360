package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.NODE;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.keyed;
import static org.mstar.resources.kv.KvHarness.range;

import java.nio.ByteBuffer;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.StreamLabel;

/**
 * A finished prefill's KV through the hand-off codec on the CPU: the prefill cache encodes its publication, the
 * decode cache decodes the bytes and retrieves, and then holds, page for page, the very bytes the prefill cache
 * holds; of a prefix its own index already held, it copies nothing.
 */
class KVManagerHandoffTest {
    private final KvHarness prefill = new KvHarness(32, 4);
    private final KvHarness decode = new KvHarness(32, 4);

    @AfterEach
    void free() {
        prefill.kv.cleanup();
        decode.kv.cleanup();
    }

    /** The prefill side's publication of {@code rid}, as the decode side decodes it from the wire. */
    private PublishedKVInfo overTheWire(String rid) {
        ByteBuffer wire = prefill.kv.codec().encode((PublishedKVInfo) prefill.kv.publish(rid));
        byte[] received = new byte[wire.remaining()];
        wire.get(received);
        return decode.kv.codec().decode(ByteBuffer.wrap(received));
    }

    private static byte[] streamBytes(KvHarness side, String rid) {
        CacheStream s = side.stream(rid, "main");
        return side.st().pool.gather(s.pageIds(0, side.st().pagesFor(s.storedLen)));
    }

    @Test
    void theDecodeSideHoldsThePrefillSidesBytesBitForBit() {
        prefill.kv.ingestRequest("a", null);
        prefill.extend("main", 1, java.util.Map.of("a", 10));
        decode.kv.ingestRequest("a", null);

        assertThat(decode.kv.admitRetrieve("a", NODE, DECODE, overTheWire("a"))).isEqualTo(AdmitOutcome.OK);

        assertThat(decode.stream("a", "main").storedLen).isEqualTo(10);
        assertThat(streamBytes(decode, "a")).isEqualTo(streamBytes(prefill, "a"));
        KvHarness.verify(decode.kv, "a", "main", prefill.oracle.get(new StreamLabel("a", "main")));
        assertThat(decode.kv.retrievedBytes()).isEqualTo(3L * decode.st().pool.pageBytes());
        assertThat(decode.kv.retrievedFromPrefixCache("a")).isZero();
        decode.kv.assertPagesConserved();
    }

    @Test
    void aRepeatedRetrieveOfTheSameHandoffChangesNothing() {
        prefill.kv.ingestRequest("a", null);
        prefill.extend("main", 1, java.util.Map.of("a", 7));
        decode.kv.ingestRequest("a", null);
        PublishedKVInfo received = overTheWire("a");
        decode.kv.admitRetrieve("a", NODE, DECODE, received);
        long generation = decode.stream("a", "main").generation;
        long copied = decode.kv.retrievedBytes();

        assertThat(decode.kv.admitRetrieve("a", NODE, DECODE, received)).isEqualTo(AdmitOutcome.OK);
        assertThat(decode.stream("a", "main").generation).isEqualTo(generation);
        assertThat(decode.kv.retrievedBytes()).isEqualTo(copied);
    }

    @Test
    void wholePagesTheDecodeSidesIndexHoldsAreNotCopied() {
        int[] prompt = range(1, 14); // 3 whole pages and 2 tokens
        prefill.ingestAndPrefill("a", prompt);
        decode.kv.enablePrefixCache(new byte[] {7}, Set.of(PREFILL, DECODE));
        decode.ingestAndPrefill("x", prompt);
        decode.kv.ingestRequest("a", keyed(prompt, 4));

        assertThat(decode.kv.admitRetrieve("a", NODE, DECODE, overTheWire("a"))).isEqualTo(AdmitOutcome.OK);

        assertThat(decode.kv.retrievedFromPrefixCache("a")).isEqualTo(12);
        assertThat(decode.kv.retrievedBytes()).as("the last page only").isEqualTo(decode.st().pool.pageBytes());
        assertThat(streamBytes(decode, "a")).isEqualTo(streamBytes(prefill, "a"));
        decode.kv.assertPagesConserved();
    }

    @Test
    void pagesOfAnotherLayoutAreRefusedWhenDecoded() {
        KvHarness bigPages = new KvHarness(32, 8);
        try {
            prefill.kv.ingestRequest("a", null);
            prefill.extend("main", 1, java.util.Map.of("a", 5));
            ByteBuffer wire = prefill.kv.codec().encode((PublishedKVInfo) prefill.kv.publish("a"));
            assertThatThrownBy(() -> bigPages.kv.codec().decode(wire)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("do not match this cache");
            PublishedKVInfo otherRank = new PublishedKVInfo(1);
            otherRank.put(1, "main", new KVSequenceInfo(4, "x", new int[] {1}, 0));
            assertThatThrownBy(() -> prefill.kv.codec().encode(otherRank)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("only its own streams");
        } finally {
            bigPages.kv.cleanup();
        }
    }
}
