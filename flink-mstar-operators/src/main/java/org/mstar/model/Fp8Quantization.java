package org.mstar.model;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * FP8 weights as config.json's {@code quantization_config} declares them: each quantised Linear weight
 * {@code <module>.weight} is stored as F8_E4M3 beside a float scale tensor, and its real value is the FP8 value
 * times the scale of its block, row or tensor. Embeddings and norms are never quantised.
 *
 * @param layout how the scales cover the weight, which also fixes the scale tensor's name
 * @param blockRows rows of one scale block ({@link Layout#BLOCK} only, else 0)
 * @param blockCols columns of one scale block ({@link Layout#BLOCK} only, else 0)
 * @param unquantisedModules Linear modules kept in the checkpoint's dtype: a module's name, or {@code re:} and a
 *     regular expression matching whole names
 */
public record Fp8Quantization(Layout layout, int blockRows, int blockCols, List<String> unquantisedModules) {

    /** The two published layouts. */
    public enum Layout {
        /**
         * {@code quant_method "fp8"} (DeepSeek-V3, Qwen3-FP8): one scale a {@code blockRows × blockCols} block in
         * {@code <module>.weight_scale_inv}, shaped [ceil(out / blockRows), ceil(in / blockCols)].
         */
        BLOCK("weight_scale_inv"),
        /** compressed-tensors, strategy "channel": one scale an output row in {@code <module>.weight_scale}, [out, 1]. */
        CHANNEL("weight_scale"),
        /** compressed-tensors, strategy "tensor": one scale in {@code <module>.weight_scale}, [] or [1]. */
        TENSOR("weight_scale");

        private final String scaleSuffix;

        Layout(String scaleSuffix) {
            this.scaleSuffix = scaleSuffix;
        }
    }

    private static final String WEIGHT = ".weight";
    private static final String LM_HEAD = "lm_head";

    public Fp8Quantization {
        Objects.requireNonNull(layout, "layout");
        if ((layout == Layout.BLOCK) != (blockRows > 0 && blockCols > 0) || blockRows < 0 || blockCols < 0) {
            throw new ModelFormatException("weight_block_size must be two positive sizes for block scales and absent "
                    + "otherwise, got [" + blockRows + ", " + blockCols + "] for " + layout);
        }
        List<String> modules = new ArrayList<>();
        unquantisedModules.stream().distinct().forEach(modules::add);
        // transformers' fp8 quantiser never converts the output embedding, listed or not
        if (layout == Layout.BLOCK && !modules.contains(LM_HEAD)) {
            modules.add(LM_HEAD);
        }
        unquantisedModules = List.copyOf(modules);
    }

    /** quant_method "fp8" with {@code rows × cols} blocks. */
    public static Fp8Quantization blocks(int rows, int cols, List<String> unquantisedModules) {
        return new Fp8Quantization(Layout.BLOCK, rows, cols, unquantisedModules);
    }

    /** compressed-tensors with one scale an output channel. */
    public static Fp8Quantization channels(List<String> unquantisedModules) {
        return new Fp8Quantization(Layout.CHANNEL, 0, 0, unquantisedModules);
    }

    /** compressed-tensors with one scale a tensor. */
    public static Fp8Quantization perTensor(List<String> unquantisedModules) {
        return new Fp8Quantization(Layout.TENSOR, 0, 0, unquantisedModules);
    }

    /**
     * Whether the Hugging Face tensor {@code hfName} is stored as FP8: the weight of a Linear module (a
     * {@code *_proj} projection or {@code lm_head}) that {@link #unquantisedModules} does not name.
     */
    public boolean quantises(String hfName) {
        if (!hfName.endsWith(WEIGHT)) {
            return false;
        }
        String module = hfName.substring(0, hfName.length() - WEIGHT.length());
        boolean linear = module.endsWith("_proj") || module.equals(LM_HEAD);
        return linear && unquantisedModules.stream().noneMatch(m -> names(m, module));
    }

    private static boolean names(String entry, String module) {
        return entry.startsWith("re:") ? Pattern.matches(entry.substring(3), module)
                : module.equals(entry) || module.endsWith("." + entry);
    }

    /** The name of the scale tensor of the quantised weight {@code hfName}. */
    public String scaleName(String hfName) {
        return hfName.substring(0, hfName.length() - WEIGHT.length()) + "." + layout.scaleSuffix;
    }

    /** The shape of the scales of an {@code [rows, cols]} weight, as this library writes them. */
    public long[] scaleShape(long rows, long cols) {
        return switch (layout) {
            case BLOCK -> new long[] {ceilDiv(rows, blockRows), ceilDiv(cols, blockCols)};
            case CHANNEL -> new long[] {rows, 1};
            case TENSOR -> new long[] {1};
        };
    }

    /** The index, in the row-major scales of an {@code [rows, cols]} weight, of the scale of element (row, col). */
    public int scaleIndex(long row, long col, long cols) {
        return switch (layout) {
            case BLOCK -> Math.toIntExact(row / blockRows * ceilDiv(cols, blockCols) + col / blockCols);
            case CHANNEL -> Math.toIntExact(row);
            case TENSOR -> 0;
        };
    }

    private static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }
}
