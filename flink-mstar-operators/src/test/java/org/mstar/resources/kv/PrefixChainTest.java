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
        PrefixChain c = new PrefixChain(4, ROOT, keys, new int[] {5, 6});
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
        PrefixChain c = new PrefixChain(2, ROOT, PrefixKeys.chain(new int[] {1, 2}, 2), null);
        c.extend(new int[] {3, 4, 5, 6, 7});
        assertThat(c.keyedPages()).isEqualTo(3);
        assertThat(c.coveredLen()).isEqualTo(7);
        List<byte[]> expected = PrefixKeys.chain(new int[] {1, 2, 3, 4, 5, 6}, 2);
        for (int i = 0; i < 3; i++) {
            assertThat(c.rootedKeys().get(i)).containsExactly(PrefixKeys.rooted(ROOT, expected.get(i)));
        }
    }
}
