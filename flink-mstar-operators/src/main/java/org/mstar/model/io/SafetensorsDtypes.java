package org.mstar.model.io;

import org.mstar.device.DType;

/** The safetensors dtype names of the float types devices store. */
final class SafetensorsDtypes {
    static final String SUPPORTED = "BF16, F16, F32";

    private SafetensorsDtypes() {}

    /** The device dtype for a header dtype name, or null when this library cannot load it. */
    static DType toDType(String name) {
        return switch (name) {
            case "BF16" -> DType.BF16;
            case "F16" -> DType.F16;
            case "F32" -> DType.F32;
            default -> null;
        };
    }

    static String name(DType dtype) {
        return switch (dtype) {
            case BF16 -> "BF16";
            case F16 -> "F16";
            case F32 -> "F32";
            default -> throw new IllegalArgumentException("safetensors writing supports " + SUPPORTED + ", got " + dtype);
        };
    }
}
