package org.mstar.resources;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.function.Function;

/**
 * What the published-info codecs' wire formats share: little-endian, a magic int first, strings as an int byte
 * count then their UTF-8 bytes.
 */
public final class WireFormat {
    private WireFormat() {}

    /** A little-endian buffer of {@code size} bytes, {@code magic} written. */
    public static ByteBuffer allocate(int size, int magic) {
        return ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN).putInt(magic);
    }

    /**
     * {@code body} over a little-endian duplicate of {@code bytes}, past a checked {@code magic}.
     *
     * @throws IllegalArgumentException naming {@code what} when the magic is another, or the bytes end too soon
     */
    public static <T> T decode(ByteBuffer bytes, int magic, String what, Function<ByteBuffer, T> body) {
        ByteBuffer b = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        try {
            if (b.getInt() != magic) {
                throw new IllegalArgumentException("not an encoded " + what);
            }
            return body.apply(b);
        } catch (BufferUnderflowException e) {
            throw new IllegalArgumentException("an encoded " + what + " cut short at byte " + b.position(), e);
        }
    }

    /** Bytes {@link #putString} writes for {@code s}. */
    public static int stringSize(String s) {
        return 4 + s.getBytes(StandardCharsets.UTF_8).length;
    }

    public static void putString(ByteBuffer b, String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        b.putInt(bytes.length).put(bytes);
    }

    /** @throws BufferUnderflowException when the count is negative or runs past the buffer */
    public static String getString(ByteBuffer b) {
        int n = b.getInt();
        if (n < 0 || n > b.remaining()) {
            throw new BufferUnderflowException();
        }
        byte[] bytes = new byte[n];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
