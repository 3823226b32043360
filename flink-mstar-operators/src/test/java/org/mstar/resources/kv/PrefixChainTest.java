package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class PrefixChainTest {
    private static final byte[] ROOT = {42};

    @Test
    void generatedTokensReplaceThePartialKeyWhenTheyFillItsPage() {
        int[] prompt = {1, 2, 3, 4, 5, 6};
        List<byte[]> keys = new ArrayList<>(PrefixKeys.chain(prompt, 4));
        keys.add(PrefixKeys.pageKey(keys.get(0), new int[] {5, 6}, List.of()));
        PrefixChain c = new PrefixChain(4, ROOT, PrefixKeys.NO_PREV, keys, new int[] {5, 6});
        assertThat(c.totalKeys()).isEqualTo(2);
        assertThat(c.keyedPages()).isEqualTo(1);
        assertThat(c.coveredLen()).isEqualTo(6);

        c.extend(new int[] {7});
        assertThat(c.keyedPages()).isEqualTo(1);
        assertThat(c.coveredLen()).isEqualTo(7);
        c.extend(new int[] {8, 9});
        assertThat(c.totalKeys()).isEqualTo(2);
        assertThat(c.keyedPages()).isEqualTo(2);
        assertThat(c.coveredLen()).isEqualTo(9);

        List<byte[]> whole = PrefixKeys.chain(new int[] {1, 2, 3, 4, 5, 6, 7, 8}, 4);
        assertThat(c.rootedKeys().get(1)).containsExactly(PrefixKeys.rooted(ROOT, whole.get(1)));
    }

    @Test
    void extendKeysSeveralPagesAtOnce() {
        PrefixChain c = new PrefixChain(2, ROOT, PrefixKeys.NO_PREV, PrefixKeys.chain(new int[] {1, 2}, 2), null);
        c.extend(new int[] {3, 4, 5, 6, 7});
        assertThat(c.keyedPages()).isEqualTo(3);
        assertThat(c.coveredLen()).isEqualTo(7);
        List<byte[]> expected = PrefixKeys.chain(new int[] {1, 2, 3, 4, 5, 6}, 2);
        for (int i = 0; i < 3; i++) {
            assertThat(c.rootedKeys().get(i)).containsExactly(PrefixKeys.rooted(ROOT, expected.get(i)));
        }
    }

    /** A seeded chain (a request with an adapter) keys every page after its seed, the first whole page included. */
    @Test
    void aSeededChainKeysItsPagesAfterTheSeedAlsoWhenGeneratedTokensFillThem() {
        byte[] seed = PrefixKeys.fingerprint("adapter", "a");
        PrefixChain seeded = new PrefixChain(4, ROOT, seed, List.of(PrefixKeys.pageKey(seed, new int[] {1, 2},
                List.of())), new int[] {1, 2});
        PrefixChain plain = new PrefixChain(4, ROOT, PrefixKeys.NO_PREV, List.of(PrefixKeys.pageKey(PrefixKeys.NO_PREV,
                new int[] {1, 2}, List.of())), new int[] {1, 2});
        seeded.extend(new int[] {3, 4, 5, 6, 7, 8});
        plain.extend(new int[] {3, 4, 5, 6, 7, 8});

        List<byte[]> expected = PrefixKeys.chain(new int[] {1, 2, 3, 4, 5, 6, 7, 8}, 4, seed);
        for (int i = 0; i < 2; i++) {
            assertThat(seeded.rootedKeys().get(i)).containsExactly(PrefixKeys.rooted(ROOT, expected.get(i)));
            assertThat(seeded.rootedKeys().get(i)).isNotEqualTo(plain.rootedKeys().get(i));
        }
    }
}
