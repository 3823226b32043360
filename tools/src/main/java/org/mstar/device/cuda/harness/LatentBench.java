package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.mstar.device.DType;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.model.Architecture;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LatentKvConfig;
import org.mstar.resources.kv.KVManager;

/**
 * MLA decode attention at DeepSeek-V2's latent geometry (16 heads, kv_lora_rank 512, RoPE part 64: 576 bf16 values a
 * key; 64-token pages scattered through the pool): bytes that must move (every visible latent row once, plus q and
 * out) over the median time of graph-replayed calls, against the copy bandwidth measured in the same call. And the
 * latent pool as the engine allocates it (the KV manager of DeepSeek-V2-Lite's 27 layers): device bytes per token and
 * layer, measured as the growth of the device memory in use and as the pool tensor's size.
 */
final class LatentBench {
    static final int HEADS = 16;
    static final int RANK = 512;
    static final int ROPE = 64;
    static final int WIDTH = RANK + ROPE;
    static final int PAGE = 64;
    /** {keys, batch} of the decode rows. */
    static final int[][] CASES = {{4096, 1}, {4096, 16}, {4096, 64}, {8192, 1}, {8192, 16}, {8192, 64},
        {16384, 1}, {16384, 16}, {16384, 64}};

    private final Twin tw;

    LatentBench(Twin twin) {
        this.tw = twin;
    }

    record Row(int keys, int batch, double megabytes, double micros, double terabytesPerSecond) {}

    List<Row> run(int[][] cases) {
        long maxTokens = 0;
        for (int[] c : cases) {
            maxTokens = Math.max(maxTokens, (long) c[0] * c[1]);
        }
        int pages = Math.toIntExact(maxTokens / PAGE + 16);
        List<Row> rows = new ArrayList<>();
        try (Tensor pool = AttentionBench.randomBf16(tw, 1, pages, 1, PAGE, 1, WIDTH)) {
            for (int[] c : cases) {
                rows.add(measure(pool, pages, c[0], c[1]));
                System.out.printf(Locale.ROOT, "latent bench: %d keys, batch %d: %.1f µs%n", c[0], c[1],
                        rows.get(rows.size() - 1).micros);
            }
        }
        return rows;
    }

    private Row measure(Tensor pool, int pages, int keys, int batch) {
        CudaDevice gpu = tw.gpu;
        int perSeq = (keys + PAGE - 1) / PAGE;
        int[] qoIndptr = new int[batch + 1];
        int[] kvIndptr = new int[batch + 1];
        int[] last = new int[batch];
        for (int r = 0; r < batch; r++) {
            qoIndptr[r + 1] = r + 1;
            kvIndptr[r + 1] = (r + 1) * perSeq;
            last[r] = keys - (perSeq - 1) * PAGE;
        }
        int[] indices = java.util.Arrays.copyOf(Twin.permutation(tw.rnd, pages), batch * perSeq);
        try (Tensor q = gpu.fromFloats(tw.randomFloats(batch * HEADS * WIDTH, 1f, DType.BF16), DType.BF16, batch,
                HEADS, WIDTH);
             Tensor out = gpu.allocate(DType.BF16, batch, HEADS, RANK);
             Tensor qo = gpu.fromInts(qoIndptr, batch + 1);
             Tensor kv = gpu.fromInts(kvIndptr, batch + 1);
             Tensor idx = gpu.fromInts(indices, indices.length);
             Tensor lastT = gpu.fromInts(last, batch)) {
            PagedAttentionPlan plan = new PagedAttentionPlan(batch, qo, kv, idx, lastT, PAGE, batch, 1, keys, true, -1,
                    false, (float) (1 / Math.sqrt(128 + ROPE)));
            double ms = Timing.graphedMillisPerCall(gpu, i -> gpu.ops().latentAttention(q, pool, 0, plan, out));
            double bytes = 2.0 * batch * keys * WIDTH + 2.0 * batch * HEADS * (WIDTH + RANK);
            return new Row(keys, batch, bytes / 1e6, ms * 1e3, bytes / (ms * 1e-3) / 1e12);
        }
    }

    /** DeepSeek-V2-Lite's geometry, as far as its KV cache goes. */
    static ModelConfig deepseekV2Lite() {
        return ModelConfig.builder(Architecture.DEEPSEEK_V2)
                .hiddenSize(2048).intermediateSize(10944).numLayers(27).numHeads(HEADS).headDim(ROPE)
                .latentAttention(new LatentAttention(0, RANK, 128, ROPE, 128)).rmsNormEps(1e-6)
                .maxPositionEmbeddings(163_840).vocabSize(102_400).bosTokenId(100_000).eosTokenId(100_001)
                .dtype(DType.BF16).build();
    }

    /**
     * The bf16 latent pool of {@code pages} pages the engine's KV manager allocates for DeepSeek-V2-Lite: bytes per
     * token and layer from the growth of the device memory in use, and from the pool tensor.
     */
    String poolBytes(int pages) {
        CudaDevice gpu = tw.gpu;
        ModelConfig config = deepseekV2Lite();
        KvCacheOptions options = KvCacheOptions.builder().maxSeqLen(pages * PAGE).maxNumPages(pages).pageSize(PAGE)
                .prefixCache(false).build();
        long before = gpu.memoryInUse();
        KVManager kv = new KVManager(LatentKvConfig.of(config, options, config.numLayers(), pages, false, 0), gpu,
                DType.BF16, 1, 0, null);
        long grown = gpu.memoryInUse() - before;
        Tensor pool = kv.pool();
        double slots = (double) config.numLayers() * pages * PAGE;
        String row = String.format(Locale.ROOT, "| %s | %d | %d | %.1f | %.1f | %.0f |%n", shape(pool), pages, PAGE,
                grown / slots, pool.byteSize() / slots, pool.byteSize() / slots / DType.BF16.bytes());
        kv.cleanup();
        return "| pool (DeepSeek-V2-Lite, 27 layers, bf16) | pages | page tokens | device bytes / token / layer "
                + "(memory in use) | pool tensor bytes / token / layer | values / token / layer |\n"
                + "|---|---|---|---|---|---|\n" + row;
    }

    private static String shape(Tensor t) {
        StringBuilder sb = new StringBuilder("[");
        for (int d = 0; d < t.rank(); d++) {
            sb.append(d == 0 ? "" : ", ").append(t.dim(d));
        }
        return sb.append(']').toString();
    }

    static String table(List<Row> rows, double peakTbPerS) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "| keys | batch | MB moved | µs | TB/s | of %.2f TB/s |%n", peakTbPerS));
        sb.append("|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "| %d | %d | %.1f | %.1f | %.2f | %.0f%% |%n", r.keys, r.batch,
                    r.megabytes, r.micros, r.terabytesPerSecond, 100 * r.terabytesPerSecond / peakTbPerS));
        }
        return sb.toString();
    }
}
