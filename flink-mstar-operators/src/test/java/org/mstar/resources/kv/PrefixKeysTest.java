package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.List;
import org.junit.jupiter.api.Test;

class PrefixKeysTest {

    private static byte[] le32(int v) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).array();
    }

    @Test
    void pageKeyHashesTheLengthPrefixedCanonicalEncoding() throws Exception {
        byte[] prev = {9, 8, 7};
        int[] tokens = {1, 256, -1};
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        md.update(le32(3));
        md.update(prev);
        md.update(le32(12));
        md.update(le32(1));
        md.update(le32(256));
        md.update(le32(-1));
        md.update(le32(0));
        assertThat(PrefixKeys.pageKey(prev, tokens, List.of())).containsExactly(md.digest());
    }

    @Test
    void itemsAreEncodedAsSlotsThenDigest() throws Exception {
        byte[] digest = {1, 2};
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        md.update(le32(0));
        md.update(le32(4));
        md.update(le32(5));
        md.update(le32(18));
        md.update(le32(1));
        md.update(le32(3));
        md.update(le32(2));
        md.update(le32(2));
        md.update(digest);
        assertThat(PrefixKeys.pageKey(PrefixKeys.NO_PREV, new int[] {5},
                List.of(new PrefixKeys.PageItem(1, 3, 2, digest)))).containsExactly(md.digest());
    }

    @Test
    void chainFoldsEachKeyIntoTheNext() {
        int[] tokens = {1, 2, 3, 4, 5, 6, 7};
        List<byte[]> keys = PrefixKeys.chain(tokens, 3);
        assertThat(keys).hasSize(2);
        byte[] k0 = PrefixKeys.pageKey(PrefixKeys.NO_PREV, new int[] {1, 2, 3}, List.of());
        assertThat(keys.get(0)).containsExactly(k0);
        assertThat(keys.get(1)).containsExactly(PrefixKeys.pageKey(k0, new int[] {4, 5, 6}, List.of()));
        assertThat(PrefixKeys.chain(List.of(new int[] {1, 2, 3}), null, new byte[] {1}).get(0)).isNotEqualTo(k0);
    }

    @Test
    void fingerprintTakesBytesAsIsAndOtherFieldsAsTheirString() throws Exception {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        md.update(le32(2));
        md.update(new byte[] {1, 2});
        md.update(le32(3));
        md.update("NHD".getBytes(StandardCharsets.UTF_8));
        md.update(le32(2));
        md.update("16".getBytes(StandardCharsets.UTF_8));
        assertThat(PrefixKeys.fingerprint(new byte[] {1, 2}, "NHD", 16)).containsExactly(md.digest());
        byte[] key = {5};
        assertThat(PrefixKeys.rooted(new byte[] {1}, key)).isNotEqualTo(PrefixKeys.rooted(new byte[] {2}, key));
    }
}
