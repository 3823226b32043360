package org.mstar.model.io;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.stream.IntStream;
import org.mstar.device.DType;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.Fp8Quantizer;
import org.mstar.model.ModelFormatException;

/**
 * Reads the tensors of an FP8 checkpoint as real values: a weight its {@link Fp8Quantization} quantises is
 * dequantised on the host (each F8_E4M3 element times its scale, rounded once to the destination dtype) and
 * uploaded in row chunks; every other tensor is copied as {@link Checkpoint#copyTo} does. {@link #copyCodesTo} keeps
 * a quantised weight in FP8 instead.
 */
public final class Fp8WeightReader {
    /** Elements dequantised per upload. */
    private static final long CHUNK_ELEMENTS = 1 << 22;

    private final Checkpoint checkpoint;
    private final Fp8Quantization quantization;

    public Fp8WeightReader(Checkpoint checkpoint, Fp8Quantization quantization) {
        this.checkpoint = checkpoint;
        this.quantization = quantization;
    }

    /**
     * Fills {@code dst} with the real values of the Hugging Face tensor {@code hfName}.
     *
     * @throws ModelFormatException naming the tensor when a quantised weight is not a 2-D F8_E4M3 tensor of
     *     {@code dst}'s shape, or its scales are missing or misshapen
     */
    public void copyTo(String hfName, Tensor dst) throws IOException {
        if (!quantization.quantises(hfName)) {
            checkpoint.copyTo(hfName, dst);
            return;
        }
        long[] shape = requireQuantised(hfName, dst.shape());
        int rows = Math.toIntExact(shape[0]);
        int cols = Math.toIntExact(shape[1]);
        float[] scales = scales(quantization.scaleName(hfName), rows, cols);
        ByteBuffer codes = checkpoint.bytes(hfName);
        DType to = dst.dtype();
        int rowsPerChunk = (int) Math.max(1, Math.min(rows, CHUNK_ELEMENTS / cols));
        ByteBuffer out = ByteBuffer.allocateDirect(rowsPerChunk * cols * to.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (int first = 0; first < rows; first += rowsPerChunk) {
            int n = Math.min(rowsPerChunk, rows - first);
            int chunkFirst = first;
            // absolute gets and puts at distinct indices: safe from parallel workers
            IntStream.range(0, n).parallel().forEach(r -> {
                int row = chunkFirst + r;
                for (int c = 0; c < cols; c++) {
                    float scale = scales[quantization.scaleIndex(row, c, cols)];
                    HostFloats.put(out, to, r * cols + c, Fp8Quantizer.dequantise(codes.get(row * cols + c), scale));
                }
            });
            dst.device().copyFromHost(out.clear().limit(n * cols * to.bytes()), dst.rows(first, n));
        }
    }

    /**
     * Copies the codes of the quantised weight {@code hfName} into {@code dst} as they are stored, and its scales
     * into dst's scale grid: each grid block lies inside one of the checkpoint's blocks (the same blocks, or one
     * row of them, or the checkpoint's one scale), whose scale it takes.
     *
     * @throws ModelFormatException as {@link #copyTo}, or when the config does not quantise {@code hfName}
     */
    public void copyCodesTo(String hfName, Fp8Weight dst) throws IOException {
        if (!quantization.quantises(hfName)) {
            throw new ModelFormatException("tensor " + hfName + " is not FP8 in this checkpoint's quantization_config");
        }
        long[] shape = requireQuantised(hfName, dst.shape());
        int rows = Math.toIntExact(shape[0]);
        int cols = Math.toIntExact(shape[1]);
        float[] stored = scales(quantization.scaleName(hfName), rows, cols);
        int gridRows = Math.toIntExact(dst.scales().dim(0));
        int gridCols = Math.toIntExact(dst.scales().dim(1));
        ByteBuffer grid = ByteBuffer.allocateDirect(gridRows * gridCols * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < gridRows; i++) {
            for (int j = 0; j < gridCols; j++) {
                long row = (long) i * dst.blockRows();
                long col = (long) j * dst.blockCols();
                grid.putFloat(stored[quantization.scaleIndex(row, col, cols)]);
            }
        }
        dst.device().copyFromHost(checkpoint.bytes(hfName), dst.codes());
        dst.device().copyFromHost(grid.flip(), dst.scales());
    }

    /** The shape of the quantised weight {@code hfName}, checked to be a 2-D F8_E4M3 tensor of shape {@code expected}. */
    private long[] requireQuantised(String hfName, long[] expected) {
        TensorInfo info = checkpoint.info(hfName);
        if (!info.safetensorsDtype().equals(SafetensorsDtypes.F8_E4M3)) {
            throw new ModelFormatException("tensor " + hfName + " in " + info.file() + " has dtype "
                    + info.safetensorsDtype() + ", but quantization_config quantises it: expected "
                    + SafetensorsDtypes.F8_E4M3);
        }
        long[] shape = info.shape();
        if (shape.length != 2 || !Arrays.equals(shape, expected)) {
            throw new ModelFormatException("tensor " + hfName + " in " + info.file() + " has shape "
                    + Arrays.toString(shape) + ", expected " + Arrays.toString(expected));
        }
        return shape;
    }

    private float[] scales(String name, int rows, int cols) throws IOException {
        TensorInfo info = checkpoint.info(name);
        long[] expected = quantization.scaleShape(rows, cols);
        long count = Arrays.stream(expected).reduce(1, Math::multiplyExact);
        // compressed-tensors writes per-tensor scales as [] or [1] and channel scales as [out, 1]; blocks must match
        boolean fits = quantization.layout() == Fp8Quantization.Layout.BLOCK ? Arrays.equals(info.shape(), expected)
                : info.numel() == count;
        if (!fits) {
            throw new ModelFormatException("scale tensor " + name + " in " + info.file() + " has shape "
                    + Arrays.toString(info.shape()) + ", expected " + Arrays.toString(expected) + " for a ["
                    + rows + ", " + cols + "] weight");
        }
        DType dtype = info.dtype();
        ByteBuffer bytes = checkpoint.bytes(name);
        float[] scales = new float[Math.toIntExact(count)];
        for (int i = 0; i < scales.length; i++) {
            scales[i] = HostFloats.get(bytes, dtype, i);
        }
        return scales;
    }
}
