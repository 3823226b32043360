package org.mstar.model.io;

import java.nio.file.Path;
import java.util.Arrays;
import org.mstar.device.DType;
import org.mstar.model.ModelFormatException;

/** One tensor's entry in a safetensors header: where its bytes lie and how to read them. */
public final class TensorInfo {
    private final String name;
    private final Path file;
    private final String safetensorsDtype;
    private final long[] shape;
    private final long fileOffset;
    private final long byteSize;

    TensorInfo(String name, Path file, String safetensorsDtype, long[] shape, long fileOffset, long byteSize) {
        this.name = name;
        this.file = file;
        this.safetensorsDtype = safetensorsDtype;
        this.shape = shape.clone();
        this.fileOffset = fileOffset;
        this.byteSize = byteSize;
    }

    public String name() {
        return name;
    }

    /** The safetensors file that holds the bytes. */
    public Path file() {
        return file;
    }

    /** The dtype as the header spells it, e.g. "BF16" or "I64". */
    public String safetensorsDtype() {
        return safetensorsDtype;
    }

    /**
     * The device dtype of the stored elements.
     *
     * @throws ModelFormatException for dtypes other than BF16, F16 and F32 (F8_E4M3 included: see
     *     {@link Fp8WeightReader}), naming the tensor and file
     */
    public DType dtype() {
        DType d = SafetensorsDtypes.toDType(safetensorsDtype);
        if (d == null) {
            throw new ModelFormatException("tensor " + name + " in " + file + " has dtype " + safetensorsDtype
                    + SafetensorsDtypes.refusal(safetensorsDtype));
        }
        return d;
    }

    /** A copy of the shape. */
    public long[] shape() {
        return shape.clone();
    }

    public long numel() {
        return Arrays.stream(shape).reduce(1, Math::multiplyExact);
    }

    /** Offset of the first byte from the start of the file. */
    public long fileOffset() {
        return fileOffset;
    }

    public long byteSize() {
        return byteSize;
    }

    @Override
    public String toString() {
        return name + " " + safetensorsDtype + Arrays.toString(shape);
    }
}
