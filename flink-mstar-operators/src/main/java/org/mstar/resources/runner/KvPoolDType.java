package org.mstar.resources.runner;

import org.mstar.device.DType;
import org.mstar.resources.KVCacheDType;

/** The element type of a paged KV pool: what its {@link KVCacheDType} says, over the model's own dtype. */
public final class KvPoolDType {
    private KvPoolDType() {}

    /** FP8 E4M3 codes for {@link KVCacheDType#FP8_E4M3}; otherwise {@code modelDType}. */
    public static DType of(KVCacheDType cacheDType, DType modelDType) {
        return cacheDType == KVCacheDType.FP8_E4M3 ? DType.F8_E4M3 : modelDType;
    }
}
