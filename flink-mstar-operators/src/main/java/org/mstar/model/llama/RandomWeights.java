package org.mstar.model.llama;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.stream.IntStream;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.ModelConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.io.HostFloats;

/**
 * Seeded random {@link LlamaWeights} of any geometry, for tests and benchmarks: projections and embeddings
 * ~ N(0, 0.02²) (GPT-2's initialisation, which keeps activations of a random model in range), norm weights
 * ~ 1 + N(0, 0.05²) as the forward applies them, biases ~ N(0, 0.02²).
 *
 * <p>Values are counter-based: element j of the Hugging Face tensor {@code name} depends only on
 * (seed, name, j), never on the device, the dtype's chunking or thread scheduling, so equal seeds give equal
 * models everywhere. The normal is approximated by a sum of four uniforms (Irwin–Hall, bounded at ±3.5σ),
 * which is cheap enough to fill billions of weights.
 */
public final class RandomWeights {
    private static final double PROJECTION_STD = 0.02;
    private static final double NORM_STD = 0.05;
    /** Elements generated per upload. */
    private static final long CHUNK_ELEMENTS = 1 << 20;

    private RandomWeights() {}

    /** Random weights for {@code config}, as {@code dtype} tensors on {@code device}. */
    public static LlamaWeights create(ModelConfig config, Device device, DType dtype, long seed) {
        return create(config, device, dtype, seed, WeightQuantization.NONE);
    }

    /**
     * Random weights as {@link #create(ModelConfig, Device, DType, long)} draws them, the projections quantised to
     * FP8 at load when {@code quantization} asks for it (as a checkpoint of these values would be).
     */
    public static LlamaWeights create(ModelConfig config, Device device, DType dtype, long seed,
                                      WeightQuantization quantization) {
        try {
            // norm weights come out near 1 as the forward applies them, whatever offset the checkpoint stores them with
            double normMean = 1 - config.normWeightOffset();
            Fp8Residency fp8 = quantization.fp8Weights() ? Fp8Residency.quantisedAtLoad(quantization) : null;
            return LlamaWeights.fill(config, device, dtype, fp8, (name, dst) -> fill(dst, seed, name, normMean));
        } catch (IOException e) {
            throw new UncheckedIOException(e); // nothing here reads files
        }
    }

    private static void fill(Tensor dst, long seed, String name, double normMean) {
        boolean norm = LlamaWeights.isNorm(name);
        fill(dst, seed, name, norm ? normMean : 0, norm ? NORM_STD : PROJECTION_STD);
    }

    /**
     * Fills {@code dst} with N(mean, std²) values that depend only on (seed, name, element index), as every weight
     * here is drawn; other model families' random weights use it too.
     */
    public static void fill(Tensor dst, long seed, String name, double mean, double std) {
        long stream = mix(seed ^ mix(fnv1a(name)));
        DType dtype = dst.dtype();
        long rows = dst.dim(0);
        long rowElems = dst.numel() / rows;
        long rowsPerChunk = Math.max(1, CHUNK_ELEMENTS / rowElems);
        ByteBuffer buf = ByteBuffer.allocateDirect(Math.toIntExact(Math.min(rows, rowsPerChunk) * rowElems * dtype.bytes()))
                .order(ByteOrder.LITTLE_ENDIAN);
        for (long row = 0; row < rows; row += rowsPerChunk) {
            long n = Math.min(rowsPerChunk, rows - row);
            long first = row * rowElems;
            int count = Math.toIntExact(n * rowElems);
            buf.clear().limit(count * dtype.bytes());
            // absolute puts at distinct indices: safe from parallel workers
            IntStream.range(0, count).parallel().forEach(k ->
                    HostFloats.put(buf, dtype, k, (float) (mean + std * normal(stream, first + k))));
            dst.device().copyFromHost(buf, dst.rows(row, n));
        }
    }

    /** An approximately standard normal value for element {@code index} of a stream. */
    private static double normal(long stream, long index) {
        long bits = mix(stream + index * 0x9E3779B97F4A7C15L);
        double sum = 0;
        for (int i = 0; i < 4; i++) {
            sum += ((bits >>> (16 * i)) & 0xFFFF) + 0.5;
        }
        // four uniforms on (0, 1): mean 2, variance 4/12
        return (sum / 65536.0 - 2.0) * Math.sqrt(3.0);
    }

    /** SplitMix64's finaliser: a bijective 64-bit mix. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    private static long fnv1a(String s) {
        long h = 0xCBF29CE484222325L;
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xFF)) * 0x100000001B3L;
        }
        return h;
    }
}
