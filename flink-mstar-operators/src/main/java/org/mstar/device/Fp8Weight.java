package org.mstar.device;

import java.util.Arrays;

/**
 * A Linear weight {@code [N, K]} kept as FP8 on its device: E4M3 codes ({@link Float8E4m3}) and a grid of fp32 scales,
 * one a {@code blockRows × blockCols} block, so that element (i, j) is
 * {@code decode(codes[i, j]) · scales[i / blockRows, j / blockCols]}. The three published layouts are grids:
 * 128 × 128 blocks, one scale a row ({@code blockRows} 1, {@code blockCols} K) and one a tensor ({@code N × K}).
 * {@link ProjectionOps#matmul} takes it as its weight. A weight that {@link #quantisesActivations() quantises
 * activations} (W8A8) has its products take their input rows quantised per token ({@link Fp8Rows}) as well.
 *
 * <p>As an {@link Fp8Tensor} it has the weight's shape; {@link #rows} views whole blocks of rows.
 */
public final class Fp8Weight implements Fp8Tensor {
    private final Tensor codes;
    private final Tensor scales;
    private final int blockRows;
    private final int blockCols;
    private final boolean quantisesActivations;

    /**
     * @param codes U8 {@code [N, K]}: E4M3 codes
     * @param scales F32 {@code [ceil(N / blockRows), ceil(K / blockCols)]}
     */
    public Fp8Weight(Tensor codes, Tensor scales, int blockRows, int blockCols) {
        this(codes, scales, blockRows, blockCols, false);
    }

    private Fp8Weight(Tensor codes, Tensor scales, int blockRows, int blockCols, boolean quantisesActivations) {
        if (codes.dtype() != DType.U8 || codes.rank() != 2 || scales.dtype() != DType.F32 || blockRows < 1
                || blockCols < 1) {
            throw new IllegalArgumentException("an FP8 weight is U8 codes [N, K] and F32 scales with positive blocks, got "
                    + codes + ", " + scales + ", blocks " + blockRows + "x" + blockCols);
        }
        long[] grid = grid(codes.dim(0), codes.dim(1), blockRows, blockCols);
        if (scales.numel() != grid[0] * grid[1]) {
            throw new IllegalArgumentException("scales " + scales + " must hold " + grid[0] + "x" + grid[1]
                    + " for " + codes + " in " + blockRows + "x" + blockCols + " blocks");
        }
        this.codes = codes;
        this.scales = scales.reshape(grid);
        this.blockRows = blockRows;
        this.blockCols = blockCols;
        this.quantisesActivations = quantisesActivations;
    }

    /** The same codes and scales as a W8A8 weight: its products quantise their input rows ({@link Fp8Rows}). */
    public Fp8Weight quantisingActivations() {
        return new Fp8Weight(codes, scales, blockRows, blockCols, true);
    }

    /**
     * Whether a product with this weight takes its input quantised per row to FP8 (W8A8): {@link ProjectionOps#matmul}
     * quantises an input that is not {@link Fp8Rows} already, as {@link Fp8Rows#quantise} defines it.
     */
    public boolean quantisesActivations() {
        return quantisesActivations;
    }

    /** One scale a weight row over the full width (per channel), the layout the W8A8 GEMM's epilogue takes. */
    public boolean scalesPerRow() {
        return blockRows == 1 && blockCols >= codes.dim(1);
    }

    /** One scale for the whole weight (per tensor). */
    public boolean scalePerTensor() {
        return blockRows >= codes.dim(0) && blockCols >= codes.dim(1);
    }

    /** A new weight {@code [n, k]} on {@code device} with unspecified codes and scales. */
    public static Fp8Weight allocate(Device device, long n, long k, int blockRows, int blockCols) {
        long[] grid = grid(n, k, blockRows, blockCols);
        Tensor codes = device.allocate(DType.U8, n, k);
        try {
            return new Fp8Weight(codes, device.allocate(DType.F32, grid), blockRows, blockCols);
        } catch (RuntimeException e) {
            codes.close();
            throw e;
        }
    }

    private static long[] grid(long n, long k, int blockRows, int blockCols) {
        return new long[] {(n + blockRows - 1) / blockRows, (k + blockCols - 1) / blockCols};
    }

    /** U8 {@code [N, K]}: the E4M3 codes. */
    @Override
    public Tensor codes() {
        return codes;
    }

    /** F32 {@code [ceil(N / blockRows), ceil(K / blockCols)]}: the scales. */
    @Override
    public Tensor scales() {
        return scales;
    }

    public int blockRows() {
        return blockRows;
    }

    public int blockCols() {
        return blockCols;
    }

    /**
     * Rows {@code [firstRow, firstRow + rows)}, sharing codes and scales; they must start a block of rows and end
     * one (or the weight).
     */
    @Override
    public Fp8Weight rows(long firstRow, long rows) {
        long n = codes.dim(0);
        if (firstRow % blockRows != 0 || (rows % blockRows != 0 && firstRow + rows != n)) {
            throw new IllegalArgumentException("rows [" + firstRow + ", " + (firstRow + rows) + ") of an FP8 weight of "
                    + n + " rows do not cover whole blocks of " + blockRows + " rows");
        }
        long firstBlock = firstRow / blockRows;
        long blocks = (rows + blockRows - 1) / blockRows;
        return new Fp8Weight(codes.rows(firstRow, rows), scales.rows(firstBlock, blocks), blockRows, blockCols,
                quantisesActivations);
    }

    @Override
    public Tensor reshape(long... shape) {
        throw new UnsupportedOperationException("an FP8 weight keeps its shape " + Arrays.toString(shape()));
    }

    @Override
    public String toString() {
        return "Fp8Weight" + Arrays.toString(shape()) + " scales " + blockRows + "x" + blockCols
                + (quantisesActivations ? " W8A8" : "");
    }
}
