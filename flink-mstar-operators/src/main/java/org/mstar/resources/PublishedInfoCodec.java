package org.mstar.resources;

import java.nio.ByteBuffer;

/**
 * How one type of {@link PublishedInfo} crosses a process boundary (a disaggregated hand-off): to bytes and back.
 * The wire format is the codec's own and is documented where it is implemented; whoever carries the bytes (the
 * engine, the Flink operators) never reads them.
 *
 * @param <T> the published info this codec writes and reads
 */
public interface PublishedInfoCodec<T extends PublishedInfo> {

    /** The type {@link #encode} takes. */
    Class<T> type();

    /** {@code info} as bytes, from position 0 to the limit. */
    ByteBuffer encode(T info);

    /**
     * The info {@code bytes} (from their position to their limit) encode. The result may keep read-only views of
     * {@code bytes} rather than copies, so they must not change while it is in use.
     *
     * @throws IllegalArgumentException when the bytes are not this codec's encoding, or describe state this side
     *                                  cannot take (another layout)
     */
    T decode(ByteBuffer bytes);

    /** {@link #encode} of an info known only by its interface, refused by name when it is of another type. */
    default ByteBuffer encodeInfo(PublishedInfo info) {
        if (!type().isInstance(info)) {
            throw new IllegalArgumentException(getClass().getSimpleName() + " encodes " + type().getSimpleName()
                    + ", not " + info.getClass().getSimpleName());
        }
        return encode(type().cast(info));
    }
}
