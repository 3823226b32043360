package org.mstar.model.llama;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.Fp8Quantizer;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;
import org.mstar.model.WeightQuantization;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.io.Fp8WeightReader;

/**
 * Which projections a model keeps in FP8 on the device ({@link WeightQuantization#FP8}, {@link
 * WeightQuantization#FP8_W8A8}) and how they are filled; under W8A8 every FP8 weight
 * {@link Fp8Weight#quantisesActivations() quantises its products' input rows}. A checkpoint that stores FP8 weights keeps exactly those, with their codes and scales; otherwise
 * every {@code *_proj} weight is quantised at load with one scale a row, and the LM head stays in the engine's
 * dtype (as vLLM's online FP8 leaves it).
 *
 * <p>The device's scale grid is the checkpoint's where it can be: 128 × 128 blocks stay blocks when every fused
 * part (q, k, v; gate, up) starts on a block row, else they become one scale row per weight row (the same values
 * repeated); one scale a tensor becomes one a row when parts of different scales are fused.
 */
final class Fp8Residency {
    /** One scale a row, full width: the grid of weights quantised at load. */
    private static final Fp8Quantization ROWS = Fp8Quantization.channels(List.of());

    /** How the checkpoint stores its FP8 weights; empty when it stores none (all are quantised at load). */
    private final Optional<Fp8Quantization> stored;
    /** The checkpoint's FP8 codes, or null when it stores none. */
    private final Fp8WeightReader codes;
    /** Whether the weights quantise their products' activations (W8A8). */
    private final boolean activations;

    private Fp8Residency(Optional<Fp8Quantization> stored, Fp8WeightReader codes, WeightQuantization mode) {
        if (!mode.fp8Weights()) {
            throw new IllegalArgumentException("FP8 residency for weights kept as " + mode.flag());
        }
        this.stored = stored;
        this.codes = codes;
        this.activations = mode == WeightQuantization.FP8_W8A8;
    }

    /** Every {@code *_proj} weight quantised at load from the real values of its source, in {@code mode}. */
    static Fp8Residency quantisedAtLoad(WeightQuantization mode) {
        return new Fp8Residency(Optional.empty(), null, mode);
    }

    /**
     * For {@code checkpoint} of {@code config}: its FP8 weights as stored, or all projections quantised at load when
     * it stores none.
     */
    static Fp8Residency of(ModelConfig config, Checkpoint checkpoint, WeightQuantization mode) {
        return config.quantization()
                .map(q -> new Fp8Residency(Optional.of(q), new Fp8WeightReader(checkpoint, q), mode))
                .orElseGet(() -> quantisedAtLoad(mode));
    }

    /**
     * A fused projection {@code [Σ partRows, k]} whose parts are the Hugging Face weights {@code partNames}: an
     * {@link Fp8Weight} when it is kept in FP8, else a {@code dtype} tensor.
     *
     * @throws ModelFormatException when the checkpoint stores some parts in FP8 and others not
     */
    Tensor allocate(Device device, DType dtype, long k, String[] partNames, long[] partRows) {
        long n = Arrays.stream(partRows).sum();
        boolean fp8 = fp8(partNames[0]);
        for (String name : partNames) {
            if (fp8(name) != fp8) {
                throw new ModelFormatException("the fused weights " + Arrays.toString(partNames) + " are partly FP8 in "
                        + "the checkpoint; to keep them in FP8 all must be");
            }
        }
        if (!fp8) {
            return device.allocate(dtype, n, k);
        }
        Fp8Weight w = allocate(device, n, k, partNames.length, partRows);
        return activations ? w.quantisingActivations() : w;
    }

    private Fp8Weight allocate(Device device, long n, long k, int parts, long[] partRows) {
        int cols = Math.toIntExact(k);
        if (stored.isEmpty()) {
            return Fp8Weight.allocate(device, n, k, 1, cols);
        }
        Fp8Quantization q = stored.get();
        return switch (q.layout()) {
            case BLOCK -> Arrays.stream(partRows).allMatch(r -> r % q.blockRows() == 0)
                    ? Fp8Weight.allocate(device, n, k, q.blockRows(), q.blockCols())
                    : Fp8Weight.allocate(device, n, k, 1, q.blockCols());
            case CHANNEL -> Fp8Weight.allocate(device, n, k, 1, cols);
            case TENSOR -> Fp8Weight.allocate(device, n, k, parts == 1 ? Math.toIntExact(n) : 1, cols);
        };
    }

    private boolean fp8(String hfName) {
        return stored.map(q -> q.quantises(hfName))
                .orElse(hfName.endsWith("_proj.weight"));
    }

    /**
     * Fills {@code dst}: with the checkpoint's codes and scales when it stores {@code hfName} in FP8, else with the
     * real values {@code source} gives, quantised with one scale a row.
     */
    void fill(String hfName, Fp8Weight dst, DType dtype, LlamaWeights.TensorSource source) throws IOException {
        if (codes != null) {
            codes.copyCodesTo(hfName, dst);
            return;
        }
        Device device = dst.device();
        int rows = Math.toIntExact(dst.dim(0));
        int cols = Math.toIntExact(dst.dim(1));
        Fp8Quantizer.Quantised q;
        try (Tensor values = device.allocate(dtype, rows, cols)) {
            source.fill(hfName, values);
            q = Fp8Quantizer.quantise(device.toFloats(values), rows, cols, ROWS);
        }
        ByteBuffer scales = ByteBuffer.allocateDirect(q.scales().length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        scales.asFloatBuffer().put(q.scales());
        device.copyFromHost(ByteBuffer.allocateDirect(q.codes().length).put(q.codes()).flip(), dst.codes());
        device.copyFromHost(scales, dst.scales());
    }
}
