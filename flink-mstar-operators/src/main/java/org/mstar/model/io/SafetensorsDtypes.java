package org.mstar.model.io;

import org.mstar.device.DType;

/** The safetensors dtype names of the float types devices store. */
final class SafetensorsDtypes {
    static final String SUPPORTED = "BF16, F16, F32";
    /** OCP E4M3FN, one byte an element; read only as an FP8 checkpoint's quantised weights. */
    static final String F8_E4M3 = "F8_E4M3";

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

    /**
     * Why a tensor of this dtype cannot be loaded as it is: an FP8 weight needs its scales, which only
     * config.json's quantization_config says how to apply; other dtypes are not float types devices store.
     */
    static String refusal(String name) {
        return switch (name) {
            case F8_E4M3 -> "; FP8 weights load only through a quantization_config in config.json that names them";
            case "F8_E5M2" -> "; FP8 E5M2 weights are not supported (FP8 checkpoints store F8_E4M3)";
            default -> "; supported: " + SUPPORTED;
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
