package org.mstar.resources.kv;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Prefix-cache keys: SHA-256 over a canonical encoding in which every variable-length field is
 * preceded by its byte length as a 4-byte little-endian integer, and token ids are 4-byte
 * little-endian integers. The preprocess worker and the KV manager must agree on these bytes exactly,
 * so the encoding is spelled out here and nowhere else.
 *
 * <pre>
 * f(bytes)                     = le32(len(bytes)) || bytes
 * pageKey(prev, tokens, items) = H( f(prev) || f(le32 tokens...) || f(item_1 || ... || item_n) )
 * item                         = le32(startSlot) || le32(slotsBefore) || le32(totalLength) || f(digest)
 * fingerprint(fields...)       = H( f(field_1) || ... )   (non-byte fields as UTF-8 of String.valueOf)
 * </pre>
 */
public final class PrefixKeys {
    /** The previous key of a stream's first page. */
    public static final byte[] NO_PREV = new byte[0];

    private PrefixKeys() {}

    /**
     * A non-token input (an image, say) that covers slots of a page.
     *
     * @param startSlot   where the item starts on this page
     * @param slotsBefore how many of its slots fell on earlier pages
     * @param totalLength the item's whole length in slots
     * @param digest      the item's content digest
     */
    public record PageItem(int startSlot, int slotsBefore, int totalLength, byte[] digest) {}

    /** The key of one page given the previous page's key ({@link #NO_PREV} for the first). */
    public static byte[] pageKey(byte[] prev, int[] tokens, List<PageItem> items) {
        ByteBuffer ids = ByteBuffer.allocate(tokens.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int t : tokens) {
            ids.putInt(t);
        }
        ByteArrayOutputStream enc = new ByteArrayOutputStream();
        for (PageItem it : items) {
            putLe32(enc, it.startSlot());
            putLe32(enc, it.slotsBefore());
            putLe32(enc, it.totalLength());
            putField(enc, it.digest());
        }
        return sha256(field(prev), field(ids.array()), field(enc.toByteArray()));
    }

    /** Keys of consecutive pages, each folded into the next, starting from {@code root}. */
    public static List<byte[]> chain(List<int[]> pages, List<List<PageItem>> items, byte[] root) {
        List<byte[]> keys = new ArrayList<>(pages.size());
        byte[] prev = root;
        for (int i = 0; i < pages.size(); i++) {
            prev = pageKey(prev, pages.get(i), items == null ? List.of() : items.get(i));
            keys.add(prev);
        }
        return keys;
    }

    /** Keys of a token sequence cut into whole pages of {@code pageSize} (a partial tail is not keyed). */
    public static List<byte[]> chain(int[] tokens, int pageSize) {
        return chain(tokens, pageSize, NO_PREV);
    }

    /** {@link #chain(int[], int)} with the first page following {@code seed} instead of {@link #NO_PREV}. */
    public static List<byte[]> chain(int[] tokens, int pageSize, byte[] seed) {
        List<int[]> pages = new ArrayList<>();
        for (int at = 0; at + pageSize <= tokens.length; at += pageSize) {
            pages.add(Arrays.copyOfRange(tokens, at, at + pageSize));
        }
        return chain(pages, null, seed);
    }

    /** A digest of several fields; byte arrays are taken as is, anything else as UTF-8 of its string form. */
    public static byte[] fingerprint(Object... fields) {
        byte[][] parts = new byte[fields.length][];
        for (int i = 0; i < fields.length; i++) {
            Object f = fields[i];
            byte[] raw = f instanceof byte[] b ? b : String.valueOf(f).getBytes(StandardCharsets.UTF_8);
            parts[i] = field(raw);
        }
        return sha256(parts);
    }

    /** A key as stored and looked up: re-rooted under the process root, so a new root orphans every old key. */
    public static byte[] rooted(byte[] root, byte[] key) {
        return fingerprint(root, key);
    }

    private static byte[] field(byte[] b) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(b.length + 4);
        putField(out, b);
        return out.toByteArray();
    }

    private static void putField(ByteArrayOutputStream out, byte[] b) {
        putLe32(out, b.length);
        out.writeBytes(b);
    }

    private static void putLe32(ByteArrayOutputStream out, int v) {
        out.write(v);
        out.write(v >>> 8);
        out.write(v >>> 16);
        out.write(v >>> 24);
    }

    private static byte[] sha256(byte[]... parts) {
        MessageDigest md;
        try {
            md = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every Java platform", e);
        }
        for (byte[] p : parts) {
            md.update(p);
        }
        return md.digest();
    }
}
