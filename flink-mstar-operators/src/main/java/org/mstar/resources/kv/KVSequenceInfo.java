package org.mstar.resources.kv;

import java.io.Serializable;

/**
 * One published stream as one rank holds it.
 *
 * @param seqLen          committed tokens
 * @param descriptor      the producer cache's transport descriptor ({@link KvTransport#descriptor()})
 * @param pageIndices     the producer's pages holding those tokens, in order
 * @param resetGeneration the producer stream's content epoch: a change means it was rewound or replaced
 */
public record KVSequenceInfo(int seqLen, String descriptor, int[] pageIndices, long resetGeneration)
        implements Serializable {

    public KVSequenceInfo {
        pageIndices = pageIndices.clone();
    }

    @Override
    public int[] pageIndices() {
        return pageIndices.clone();
    }
}
