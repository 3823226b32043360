package org.mstar.resources;

import java.util.Locale;

/**
 * What a paged KV pool stores its keys and values in: the model's activation dtype ({@link #AUTO}: bf16 on a GPU),
 * or FP8 E4M3 codes ({@link #FP8_E4M3}), one byte an element, so a pool of the same bytes holds twice the tokens of a
 * bf16 one. FP8 pages are quantised as they are written (round to nearest, saturating at ±448) with a per-tensor scale
 * of 1, and widened to fp32 where attention reads them. Storage policy, like the page size: the checkpoint does not
 * decide it. Declared without the device layer; {@code KvPoolDType} gives the device's element type.
 */
public enum KVCacheDType {
    AUTO("auto"), FP8_E4M3("fp8_e4m3");

    private final String optionValue;

    KVCacheDType(String optionValue) {
        this.optionValue = optionValue;
    }

    /** As {@code mstar.kv.cache-dtype} and {@code --kv-cache-dtype} spell it. */
    public String optionValue() {
        return optionValue;
    }

    /** @throws IllegalArgumentException naming the values taken */
    public static KVCacheDType parse(String value) {
        for (KVCacheDType t : values()) {
            if (t.optionValue.equals(value.trim().toLowerCase(Locale.ROOT))) {
                return t;
            }
        }
        throw new IllegalArgumentException("KV cache dtype is 'auto' (the model's dtype) or 'fp8_e4m3', not '" + value + "'");
    }
}
