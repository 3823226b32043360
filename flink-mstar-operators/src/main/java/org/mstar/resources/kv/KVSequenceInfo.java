package org.mstar.resources.kv;

import java.io.Serializable;

/**
 * One published stream as one rank holds it.
 *
 * @param seqLen          committed tokens
 * @param descriptor      the producer cache's transport descriptor ({@link KvTransport#descriptor()})
 * @param pageIndices     the producer's pages holding those tokens, in order
 * @param resetGeneration the producer stream's content epoch: a change means it was rewound or replaced
 * @param carried         the contents of those pages, when the publication carries them (a decoded hand-off,
 *                        {@link PublishedKVCodec}): a reader takes them from here rather than through a transport;
 *                        null otherwise
 */
public record KVSequenceInfo(int seqLen, String descriptor, int[] pageIndices, long resetGeneration,
                             CarriedPages carried) implements Serializable {

    public KVSequenceInfo {
        pageIndices = pageIndices.clone();
    }

    /** A stream read through the transport {@code descriptor} names. */
    public KVSequenceInfo(int seqLen, String descriptor, int[] pageIndices, long resetGeneration) {
        this(seqLen, descriptor, pageIndices, resetGeneration, null);
    }

    @Override
    public int[] pageIndices() {
        return pageIndices.clone();
    }
}
