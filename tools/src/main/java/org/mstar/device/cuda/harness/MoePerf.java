package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.MoeRouting;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.device.cuda.MoeTiles;
import org.mstar.model.Architecture;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.model.MoeConfig;
import org.mstar.model.llama.RandomWeights;

/**
 * The mixture-of-experts performance rows ({@code --moe-perf}): the routed experts alone ({@code moeExperts}) at a
 * sweep of row counts on tensor-core tiles (the skinny tiles, or the grouped GEMM above 16 assignments an expert), on
 * the warpgroup GEMM (above 64 assignments an expert) and on cuBLAS GEMMs (where the ways cross, for {@link
 * org.mstar.device.KernelOptions#moeGemmExpertRows()}), and the engine on Qwen3-30B-A3B's and DeepSeek-V2-Lite's
 * geometry (bf16, random weights): decode steps at batch 1 and 64 (512-token prompts, decode graphs on) and a prefill
 * of one 2048-token prompt, written as {@link PerfTable} lines for {@code torch_moe.py}, which joins them with its
 * PyTorch peer and the bounds. A decode row's bytes are the weights its rows read (each sparse layer the expected
 * distinct experts of its rows, {@link ModelCost#weightBytesRead}) and its K/V (latent rows for DeepSeek-V2).
 */
final class MoePerf {
    /** {prompt tokens, prompts} of the prefill row. */
    static final int[][] PREFILL = {{2048, 1}};
    static final List<DecodeBench.Case> DECODE = List.of(new DecodeBench.Case(1, 512, true),
            new DecodeBench.Case(64, 512, true));
    /** Rows of the moeExperts sweep. */
    static final int[] EXPERT_ROWS = {1, 16, 64, 128, 256, 512, 1024, 2048, 8192};

    private MoePerf() {}

    /** Qwen3-30B-A3B: 48 layers (or {@code layers}), 128 experts of width 768, top 8 normalised, every layer sparse. */
    static ModelConfig qwen3_30b_a3b(int layers) {
        return ModelConfig.builder(Architecture.QWEN3_MOE)
                .hiddenSize(2048).intermediateSize(6144).numLayers(layers).numHeads(32).numKvHeads(4).headDim(128)
                .ropeTheta(1_000_000).rmsNormEps(1e-6).maxPositionEmbeddings(40_960).vocabSize(151_936)
                .bosTokenId(151_643).eosTokenId(151_645).dtype(DType.BF16)
                .moe(new MoeConfig(128, 768, MoeRouting.softmaxTopK(8, true), Collections.nCopies(layers, true)))
                .build();
    }

    /**
     * DeepSeek-V2-Lite: 27 layers (or {@code layers}), the first dense (width 10944), then 64 routed experts of width
     * 1408 (top 6, not normalised) and 2 shared ones; latent attention with kv_lora_rank 512, RoPE part 64, 16 heads,
     * q without a low-rank projection.
     */
    static ModelConfig deepseekV2Lite(int layers) {
        List<Boolean> sparse = new ArrayList<>(Collections.nCopies(layers, true));
        sparse.set(0, false);
        return ModelConfig.builder(Architecture.DEEPSEEK_V2)
                .hiddenSize(2048).intermediateSize(10_944).numLayers(layers).numHeads(16).headDim(64)
                .latentAttention(new LatentAttention(0, 512, 128, 64, 128)).rmsNormEps(1e-6)
                .maxPositionEmbeddings(4096).vocabSize(102_400).bosTokenId(100_000).eosTokenId(100_001)
                .dtype(DType.BF16)
                .moe(new MoeConfig(64, 1408, new MoeRouting(MoeRouting.Scoring.SOFTMAX, 6, false, 1, 1, 1f), sparse,
                        2 * 1408))
                .build();
    }

    /** The two geometries at their published layer counts, or both cut to {@code layers} when it is positive. */
    static List<PerfTable.Geometry> geometries(int layers) {
        ModelConfig qwen3 = qwen3_30b_a3b(layers > 0 ? layers : 48);
        ModelConfig deepseek = deepseekV2Lite(layers > 0 ? layers : 27);
        return List.of(new PerfTable.Geometry(name("Qwen3-30B-A3B", qwen3), qwen3, PREFILL, DECODE, List.of()),
                new PerfTable.Geometry(name("DeepSeek-V2-Lite", deepseek), deepseek, PREFILL, DECODE, List.of()));
    }

    /** The row's model name, with its layer count for the peer (torch_moe.py reads it back). */
    private static String name(String model, ModelConfig c) {
        return model + " (" + c.numLayers() + " layers)";
    }

    /** Measures the engine rows of {@code geometries}; returns the tab-separated table (header first). */
    static String measure(Device device, long seed, List<PerfTable.Geometry> geometries) {
        List<PerfTable.Line> lines = new ArrayList<>();
        for (PerfTable.Geometry g : geometries) {
            ModelConfig c = g.config();
            List<PrefillBench.Row> prefill = new PrefillBench(device, seed).run(c, c.numLayers(), g.prefill(), false);
            lines.addAll(PerfTable.prefillLines(g.name(), c, prefill));
            lines.addAll(PerfTable.decodeLines(g.name(), c, new DecodeBench(device, seed).run(g.name(), c, g.decode())));
        }
        StringBuilder sb = new StringBuilder(PerfTable.HEADER).append('\n');
        lines.forEach(l -> sb.append(l.tsv()).append('\n'));
        return sb.toString();
    }

    /**
     * moeExperts alone on one sparse layer of {@code c} (random experts, rows routed on the device from random
     * logits), at each of {@link #EXPERT_ROWS} on the tensor-core tiles and on cuBLAS GEMMs: median ms, and
     * the tiles' rate against the bytes of the experts the rows read at {@code terabytesPerSecond}.
     */
    static String expertsTable(CudaDevice gpu, long seed, String model, ModelConfig c, double terabytesPerSecond) {
        MoeConfig m = c.moe().orElseThrow();
        int experts = m.numExperts();
        int hidden = c.hiddenSize();
        int inter = m.expertIntermediateSize();
        int k = m.routing().topK();
        CudaDevice tiles = gpu.withOptions(gpu.options().withMoeGemmExpertRows(Integer.MAX_VALUE)
                .withWarpgroupMoe(false));
        CudaDevice warpgroup = gpu.withOptions(gpu.options().withMoeGemmExpertRows(Integer.MAX_VALUE)
                .withWarpgroupMoe(true));
        CudaDevice cublas = gpu.withOptions(gpu.options().withMoeGemmExpertRows(0).withWarpgroupMoe(false));
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%s: %d experts of width %d, top %d, hidden "
                + "%d%n%n| rows | experts read | tiles ms | of bound (%.2f TB/s) | warpgroup GEMM ms | its TFLOP/s "
                + "| cuBLAS ms | fastest |%n|---|---|---|---|---|---|---|---|%n", model, experts, inter, k, hidden,
                terabytesPerSecond));
        try (Tensor gateUp = gpu.allocate(DType.BF16, experts, 2L * inter, hidden);
             Tensor down = gpu.allocate(DType.BF16, experts, hidden, inter)) {
            RandomWeights.fill(gateUp, seed, "gate_up", 0, 0.02);
            RandomWeights.fill(down, seed, "down", 0, 0.02);
            for (int rows : EXPERT_ROWS) {
                try (Tensor x = gpu.allocate(DType.BF16, rows, hidden);
                     Tensor logits = gpu.allocate(DType.F32, rows, experts);
                     Tensor ids = gpu.allocate(DType.I32, rows, k);
                     Tensor weights = gpu.allocate(DType.F32, rows, k);
                     Tensor out = gpu.allocate(DType.BF16, rows, hidden)) {
                    RandomWeights.fill(x, seed + rows, "x", 0, 1);
                    RandomWeights.fill(logits, seed + rows, "logits", 0, 2);
                    gpu.ops().moeRoute(logits, m.routing(), ids, weights);
                    double tilesMs = Timing.medianMillis(tiles, () -> tiles.ops().moeExperts(x, gateUp, down, ids,
                            weights, out), 2, 9);
                    double cublasMs = Timing.medianMillis(cublas, () -> cublas.ops().moeExperts(x, gateUp, down, ids,
                            weights, out), 2, 9);
                    boolean serves = MoeTiles.warpgroup(rows, k, experts);
                    double warpgroupMs = serves ? Timing.medianMillis(warpgroup, () -> warpgroup.ops().moeExperts(x,
                            gateUp, down, ids, weights, out), 2, 9) : Double.NaN;
                    double read = experts * (1 - Math.pow(1 - (double) k / experts, rows));
                    double boundMs = read * 3.0 * hidden * inter * DType.BF16.bytes() / (terabytesPerSecond * 1e9);
                    double teraflops = 6.0 * rows * k * hidden * inter / (warpgroupMs * 1e9);
                    double best = Math.min(tilesMs, Math.min(cublasMs, serves ? warpgroupMs : Double.MAX_VALUE));
                    String fastest = best == tilesMs ? "tiles" : best == cublasMs ? "cuBLAS" : "warpgroup";
                    sb.append(String.format(Locale.ROOT, "| %d | %.1f | %.3f | %.0f%% | %s | %s | %.3f | %s |%n", rows,
                            read, tilesMs, 100 * boundMs / tilesMs, serves ? String.format(Locale.ROOT, "%.3f",
                                    warpgroupMs) : "-", serves ? String.format(Locale.ROOT, "%.0f", teraflops) : "-",
                            cublasMs, fastest));
                }
            }
        }
        return sb.toString();
    }
}
