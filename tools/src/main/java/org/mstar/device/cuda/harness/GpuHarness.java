package org.mstar.device.cuda.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.mstar.device.DType;
import org.mstar.device.KernelOptions;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.model.Architecture;
import org.mstar.model.ModelConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.frame.FrameModelConfig;

/**
 * Plain {@code java -cp} entry for the GPU machine (which has no build tools): runs every CUDA op against
 * the CPU reference on fresh random inputs with poisoned outputs, then the whole engine on a random
 * checkpoint against the CPU engine ({@link EngineChecks}) and batch-invariant numerics against themselves
 * ({@link InvarianceChecks}), and prints a table; then, unless
 * {@code --no-perf}, the performance tables: the kernels' (paged decode attention, the GEMMs of a
 * Llama-3-8B layer, GEMM batch invariance; skipped by {@code --no-kernel-perf}) and the engine's
 * throughput on Llama-3-8B geometry at the layer counts of {@code --engine-layers}. Tables are also written
 * as markdown under {@code --out}. {@code --prefill-perf} replaces those performance tables by the prefill
 * ones: the paged prefill attention kernel and the engine's prefill throughput (32 layers of Llama-3-8B
 * geometry) at 512, 2048 and 16384-token prompts, each on the tensor-core kernel and on the CUDA-core one.
 * {@code --decode-perf} replaces them by the decode ones: copy bandwidth, the paged decode attention kernel
 * and the projections at the batches and contexts of the engine rows, and the engine's decode steps
 * ({@link DecodeBench}) on Llama-3-8B and Llama-3.2-1B geometry against the weights+KV bound at the
 * bandwidth measured in the same call ({@code --decode-models 1B} keeps only the named geometries' engine rows).
 * {@code --invariance-perf} replaces them by the GEMMs, decode attention and engine throughput (32 layers) with
 * batch-invariant numerics off and on. {@code --skinny-perf} replaces them by copy bandwidth, the decode
 * projections of both geometries through cuBLAS and through the skinny-matmul kernel, and engine decode rows of
 * few requests with each. Exits 1 when a check fails. {@code --attention-only} runs only the attention checks
 * (paged, ragged, cross, latent) and no performance table; {@code --moe-only} likewise the mixture-of-experts checks
 * ({@link MoeChecks}) and {@code --state-space-only} the Mamba2 ops and whole Mamba2 and Bamba engines
 * ({@link StateSpaceChecks}, {@link HybridEngineChecks}). {@code --frame-perf} adds the frame-stream throughput
 * ({@link FrameBench}), with or without the other tables; {@code --preplan-perf} likewise adds decode steps with
 * pre-planning off and on ({@link PreplanBench}). {@code --perf-table} replaces every performance table
 * by the rows of the one-call table ({@link PerfTable}: prefill, decode and mixed steps on both Llama geometries),
 * written as {@code perf-table.tsv} for {@code perf_table.py}. {@code --launch-perf} adds decode steps with the
 * graphs' kernels in plain stream order and launched programmatically. {@code --profile-decode 8B:1:512,...}
 * runs a few decode steps of each case for a kernel profiler ({@code scripts/gpu/kernel_profile.py}).
 * {@code --lora-perf} replaces the tables by engine decode at batch 64 on Llama-3-8B geometry without adapters and with
 * 8 and 64 distinct rank-16 adapters ({@link LoraBench}; {@code --lora-adapters} sets the counts); the checks include the
 * engine with adapters against the CPU ({@link LoraChecks}).
 * {@code --latent-perf} replaces the tables by MLA decode attention at 4k to 16k keys and batch 1 to 64 against the copy
 * bandwidth, and the latent pool's bytes per token ({@link LatentBench}); {@code --hybrid-perf} by the Bamba engine on
 * Bamba-9B geometry ({@code --hybrid-layers} of its 32): decode at batch 1 and 64 against the weights+state+KV bound,
 * prefill of 2048 tokens against the GEMM rate ({@link HybridBench}).
 * {@code --moe-perf} replaces the tables by the mixture-of-experts ones ({@link MoePerf}): moeExperts alone on tiles and
 * on cuBLAS at a sweep of rows, and engine decode and prefill rows on Qwen3-30B-A3B and DeepSeek-V2-Lite geometry
 * (the first of {@code --engine-layers} cuts their layers), written as {@code perf-table.tsv} for
 * {@code torch_moe.py}; {@code --moe-gemm-expert-rows} sets the mean rows an expert from which the tables' MoE layers take cuBLAS.
 * {@code --warpgroup-attention} runs the tables with bf16 prefill attention on Hopper's warpgroup kernel
 * ({@link KernelOptions#warpgroupAttention}). {@code --no-qkv-rope-in-matmul} runs the tables with qkv_rope_append
 * after the qkv projection instead of RoPE and
 * the KV append in the skinny matmul's epilogue ({@link KernelOptions#qkvRopeInMatmul}). {@code --no-checks} skips
 * the checks. {@link GpuHarnessOptions} reads the switches ({@link PerfSwitch} those that replace the tables);
 * {@code --help} lists them.
 *
 * <pre>java -cp 'jars/*' org.mstar.device.cuda.harness.GpuHarness --out /tmp/out [--seed N] [--no-perf]
 *     [--no-kernel-perf] [--engine-layers 8,32] [--prefill-perf | --decode-perf [--decode-models 8B,1B] |
 *     --invariance-perf | --skinny-perf] [--attention-only | --moe-only | --state-space-only] [--frame-perf]
 *     [--preplan-perf] [--perf-table] [--launch-perf] [--profile-decode 8B:1:512,...]
 *     [--lora-perf [--lora-adapters 8,64]] [--latent-perf] [--hybrid-perf [--hybrid-layers 32]]
 *     [--moe-perf] [--moe-gemm-expert-rows N] [--warpgroup-attention] [--no-qkv-rope-in-matmul] [--no-checks]</pre>
 */
public final class GpuHarness {
    /** The copy bandwidth measured on this workplace's H200s (read + write), the decode roofline. */
    private static final double PEAK_TB_PER_S = 4.3;
    /** The prefill rows of the W8A8 GEMM table. */
    private static final int[] FP8_GEMM_ROWS = {2048, 8192};
    /** {prompt tokens, prompts} of the prefill tables: 8192 tokens per step below 16k. */
    private static final int[][] PREFILL_CASES = {{512, 16}, {2048, 4}, {16384, 1}};
    /** Decode steps a {@code --profile-decode} case runs after its warm-up. */
    private static final int PROFILED_DECODE_STEPS = 2;
    /** Layers of the mixture-of-experts models a {@code --profile-decode} case runs (those of the --moe-perf rows). */
    private static final int PROFILED_MOE_LAYERS = 12;
    /** Layers of the Bamba-9B geometry a {@code --profile-decode BAMBA:...} case runs (those of the H100 rows). */
    private static final int PROFILED_HYBRID_LAYERS = 8;
    /** Prompt tokens of the --lora-perf rows' requests. */
    private static final int LORA_CONTEXT = 512;
    /** {batch, context} of the launch table's rows, on both geometries. */
    private static final int[][] LAUNCH_ROWS = {{1, 512}, {16, 512}, {64, 512}, {256, 512}};
    /** Decode rows on Llama-3-8B geometry (graphed, then batch 256 eagerly: no graph bucket before 2026-12-02). */
    private static final List<DecodeBench.Case> DECODE_8B = List.of(
            new DecodeBench.Case(1, 512, true), new DecodeBench.Case(16, 512, true), new DecodeBench.Case(64, 512, true),
            new DecodeBench.Case(256, 512, true), new DecodeBench.Case(1, 4096, true), new DecodeBench.Case(16, 4096, true),
            new DecodeBench.Case(64, 4096, true), new DecodeBench.Case(1, 16384, true),
            new DecodeBench.Case(16, 16384, true), new DecodeBench.Case(256, 512, false));
    private static final List<DecodeBench.Case> DECODE_1B = List.of(
            new DecodeBench.Case(1, 512, true), new DecodeBench.Case(64, 512, true), new DecodeBench.Case(256, 512, true),
            new DecodeBench.Case(256, 512, false));

    /** {context, batch} of the decode attention kernel table: the 8B engine rows' shapes. */
    private static final int[][] DECODE_ATTENTION_CASES = {{512, 1}, {512, 16}, {512, 64}, {512, 256}, {4096, 1},
        {4096, 16}, {4096, 64}, {16384, 1}, {16384, 16}};

    /** Row counts of the skinny-matmul comparison: decode batches up to the kernel's largest. */
    private static final int[] SKINNY_ROW_COUNTS = {1, 2, 4, 8, 16, 32};

    private GpuHarness() {}

    /** Decode cases of few requests, each with every matmul on cuBLAS and then with the skinny kernel's default. */
    private static List<DecodeBench.Case> skinnyCases(int[][] batchAndContext) {
        List<DecodeBench.Case> cases = new ArrayList<>();
        for (int rows : new int[] {0, KernelOptions.DEFAULT_SKINNY_MATMUL_ROWS}) {
            for (int[] bc : batchAndContext) {
                cases.add(new DecodeBench.Case(bc[0], bc[1], true, rows));
            }
        }
        return cases;
    }

    /** One titled markdown table, printed as soon as it is measured; a failure is reported in its place. */
    private static String section(String title, Supplier<String> table) {
        String body;
        try {
            body = table.get();
        } catch (RuntimeException | LinkageError e) {
            body = "failed: " + e + "\n";
        }
        String s = "\n## " + title + "\n\n" + body;
        System.out.println(s);
        return s;
    }

    public static void main(String[] args) throws IOException {
        GpuHarnessOptions options = HarnessCommandLine.parseOrExit(new GpuHarnessOptions(), args);
        if (options.perf() && !options.parallelGeometries().isEmpty()) {
            try {
                ParallelBench.requireDevices(options.tensorParallel);
            } catch (IllegalArgumentException e) {
                System.err.println("gpu-harness: " + e.getMessage());
                System.exit(2);
            }
        }
        Path out = options.out;
        long seed = options.seed;
        Files.createDirectories(out);
        boolean allPassed;
        try (CudaDevice gpu = new CudaDevice(0); CpuDevice cpu = new CpuDevice()) {
            StringBuilder header = new StringBuilder();
            header.append("date ").append(LocalDate.now()).append(", seed ").append(seed).append('\n');
            header.append("device ").append(gpu.name()).append(", ").append(gpu.context().multiprocessors())
                    .append(" SMs, sm_").append(gpu.context().computeCapability()).append(", ")
                    .append(gpu.context().totalMemory() >> 20).append(" MiB\n");
            try {
                header.append("cuBLAS ").append(gpu.ops().cublasDescription()).append('\n');
            } catch (RuntimeException e) {
                header.append("cuBLAS unavailable: ").append(e.getMessage()).append('\n');
            }
            System.out.print(header);
            Twin twin = new Twin(gpu, cpu, seed);

            List<CheckResult> checks = new ArrayList<>();
            String engineNotes = "";
            if (options.runs(options.opsOnly)) {
                checks.addAll(new OpChecks(twin).run());
            }
            if (options.runs(options.fp8Only)) {
                checks.addAll(new Fp8Checks(twin).run());
                checks.addAll(new Fp8KvChecks(twin).run());
            }
            if (options.runs(options.moeOnly)) {
                checks.addAll(new MoeChecks(twin).run());
            }
            if (options.runs(options.stateSpaceOnly)) {
                checks.addAll(new StateSpaceChecks(twin).run());
                checks.addAll(new HybridEngineChecks(cpu, gpu, seed).run());
            }
            if (options.runs(options.attentionOnly)) {
                checks.addAll(new AttentionChecks(twin).run());
                checks.addAll(new RaggedAttentionChecks(twin).run());
                checks.addAll(new LatentAttentionChecks(twin).run());
            }
            if (options.runs(false)) {
                checks.addAll(new SamplingChecks(twin).run());
                checks.addAll(new FrameChecks(twin).run());
            }
            if (options.runs(options.engineOnly)) {
                engineNotes = engineChecks(gpu, cpu, seed, checks);
                engineNotes += loraChecks(gpu, cpu, seed, checks);
                InvarianceChecks invariance = new InvarianceChecks(twin, seed);
                CheckResult.attempt(checks, "batch invariance", () -> checks.addAll(invariance.run()));
                engineNotes += invariance.notes();
            }
            String table = CheckResult.table(checks);
            long failed = checks.stream().filter(c -> !c.passed()).count();
            String summary = checks.size() - failed + " of " + checks.size() + " checks passed\n";
            System.out.println(table);
            System.out.print(engineNotes + "\n" + summary);
            Files.writeString(out.resolve("harness.md"), header + "\n" + table + "\n" + engineNotes + "\n" + summary);
            allPassed = failed == 0;

            // the checks compare the fused qkv epilogue with the pair themselves; this choice is for the tables
            CudaDevice tablesGpu = gpu.withOptions(gpu.options().withQkvRopeInMatmul(!options.noQkvRopeInMatmul)
                    .withMoeGemmExpertRows(options.moeGemmExpertRows)
                    .withWarpgroupAttention(options.warpgroupAttention));
            Twin tablesTwin = twin.on(tablesGpu);
            StringBuilder tables = new StringBuilder(header);
            if (options.noQkvRopeInMatmul) {
                tables.append("qkv_rope_append after the qkv projection (RoPE and KV append not in its epilogue)\n");
            }
            if (options.warpgroupAttention) {
                tables.append("bf16 prefill attention on the warpgroup kernel (where the GPU has it)\n");
            }
            if (options.perfTable) {
                tables.append(decodeParts(tablesTwin));
                String rows = PerfTable.measure(tablesGpu, seed, PerfTable.geometries());
                Files.writeString(out.resolve("perf-table.tsv"), rows);
                System.out.print(rows);
                Files.writeString(out.resolve("perf.md"), tables);
            } else if (options.perf() && options.tables().isPresent()) {
                tables.append(switchTables(options.tables().get(), options, tablesTwin, tablesGpu, seed, out));
                Files.writeString(out.resolve("perf.md"), tables);
            } else if (options.perf() && !options.noKernelPerf) {
                GemmBench gemm = new GemmBench(tablesTwin);
                AttentionBench attention = new AttentionBench(tablesTwin);
                tables.append("\n")
                        .append(section("Copy bandwidth (1 GiB device to device, read + write)", () ->
                                String.format(java.util.Locale.ROOT, "%.2f TB/s%n", attention.copyTerabytesPerSecond())))
                        .append(section("Paged decode attention (bf16, 32/8 heads, d128, page 16)", () ->
                                AttentionBench.table(attention.run(new int[][] {
                                    {1024, 1}, {1024, 64}, {8192, 1}, {8192, 8}, {32768, 1}, {32768, 2}}),
                                        PEAK_TB_PER_S)))
                        .append(section("Paged prefill attention (bf16, 32/8 heads, d128, page 16)", () ->
                                AttentionBench.prefillTable(List.of(
                                        attention.prefill(1024, 1, AttentionBench.PrefillKernel.chosenBy(tablesGpu)),
                                        attention.prefill(4096, 1, AttentionBench.PrefillKernel.chosenBy(tablesGpu))))))
                        .append(section("Llama-3-8B layer GEMMs (bf16, cuBLAS through CudaOps.matmul)", () ->
                                GemmBench.table(gemm.run(new int[] {1, 16, 128, 1024, 4096}))))
                        .append(section("GEMM batch invariance (row r at batch M vs alone)", () ->
                                GemmBench.invarianceTable(gemm.batchInvariance(new int[] {1, 2, 4, 8, 16, 32, 64, 128,
                                    256, 1024, 4096}))));
            }
            if (options.perf() && !options.replacesTables()) {
                int[] layers = options.engineLayers();
                long benchSeed = seed;
                tables.append(section("Engine throughput (bf16, Llama-3-8B geometry, random weights, "
                        + EngineBench.PROMPT + "-token prompts)", () -> {
                            List<EngineBench.Row> rows = new EngineBench(tablesGpu, benchSeed).run(EngineBench.llama3_8b(), layers,
                                    new int[] {1, 16, 64});
                            return EngineBench.table(rows, PEAK_TB_PER_S) + "\nFit over layer counts (eager engine), carried to 32 layers:\n\n"
                                    + EngineBench.extrapolation(rows, 32, PEAK_TB_PER_S)
                                    + "\nDecode step calls (per step, mean over the timed steps):\n\n"
                                    + EngineBench.callTable(rows) + EngineBench.hostProfiles(rows);
                        }));
                Files.writeString(out.resolve("perf.md"), tables);
            }
            if (options.framePerf) {
                long benchSeed = seed;
                FrameModelConfig frames = FrameBench.geometry();
                tables.append(section("Frame throughput (bf16 random frame model: " + frames.numLayers() + " layers, hidden "
                        + frames.hiddenSize() + ", " + frames.tokensPerFrame() + "-token frames, rings full; "
                        + FrameBench.TIMED_STEPS + " timed steps)", () -> FrameBench.table(
                                new FrameBench(tablesGpu, benchSeed).run(frames, new int[] {1, 4, 16, 64}))));
                Files.writeString(out.resolve("perf.md"), tables);
            }
            if (options.preplanPerf) {
                long benchSeed = seed;
                tables.append(section(PreplanBench.TITLE, () -> PreplanBench.tables(tablesGpu, benchSeed)));
                Files.writeString(out.resolve("perf.md"), tables);
            }
            for (GpuHarnessOptions.ProfiledDecode profiled : options.profiled) {
                profileDecode(tablesGpu, seed, profiled);
            }
            if (options.launchPerf) {
                tables.append(launchTables(tablesTwin, tablesGpu, seed));
                Files.writeString(out.resolve("perf.md"), tables);
            }
        }
        System.exit(allPassed ? 0 : 1);
    }

    /** The tables of switch {@code s}, which replace the default ones. */
    private static String switchTables(PerfSwitch s, GpuHarnessOptions options, Twin twin, CudaDevice gpu, long seed,
                                       Path out) {
        return switch (s) {
            case INVARIANCE -> invarianceTables(twin, gpu, seed);
            case PREFILL -> prefillTables(twin, gpu, seed);
            case PARALLEL -> parallelTables(twin, seed, options);
            case MOE -> moeTables(twin, gpu, seed, options.moeLayers(), out);
            case FP8 -> fp8Tables(twin, gpu, seed);
            case FP8_GEMM -> "\n" + fp8GemmTable(twin, seed);
            case SKINNY -> skinnyTables(twin, gpu, seed);
            case LORA -> loraTables(gpu, seed, options.loraAdapters);
            case LATENT -> latentTables(twin);
            case HYBRID -> hybridTables(twin, gpu, seed, options.hybridLayers);
            case DECODE -> decodeTables(twin, gpu, seed, options.decodeModels);
        };
    }

    /** The GEMMs, decode attention and engine throughput (32 layers), batch-invariant numerics off and then on. */
    private static String invarianceTables(Twin twin, CudaDevice gpu, long seed) {
        StringBuilder sb = new StringBuilder();
        for (boolean invariant : new boolean[] {false, true}) {
            String mode = "batch-invariant numerics " + (invariant ? "on" : "off");
            CudaDevice modeGpu = gpu.withOptions(gpu.options().withBatchInvariant(invariant));
            Twin modeTwin = twin.on(modeGpu);
            GemmBench gemm = new GemmBench(modeTwin);
            AttentionBench attention = new AttentionBench(modeTwin);
            sb.append(section("Llama-3-8B layer GEMMs, " + mode, () ->
                            GemmBench.table(gemm.run(new int[] {1, 16, 64, 128, 1024}))))
                    .append(section("Paged decode attention (bf16, 32/8 heads, d128, page 16), " + mode, () ->
                            AttentionBench.table(attention.run(new int[][] {
                                {1024, 1}, {1024, 64}, {8192, 1}, {8192, 8}}), PEAK_TB_PER_S)))
                    .append(section("Engine throughput, " + mode + " (bf16, Llama-3-8B geometry, 32 layers, "
                            + "random weights, " + EngineBench.PROMPT + "-token prompts)", () ->
                            EngineBench.table(new EngineBench(modeGpu, seed).run(EngineBench.llama3_8b(),
                                    new int[] {32}, new int[] {1, 64}), PEAK_TB_PER_S)));
        }
        return sb.toString();
    }

    /**
     * The paged prefill attention kernels (warpgroup where the GPU has it, mma.sync, CUDA cores), and engine prefill,
     * at {@link #PREFILL_CASES}.
     */
    private static String prefillTables(Twin twin, CudaDevice gpu, long seed) {
        AttentionBench attention = new AttentionBench(twin);
        return section("Paged prefill attention (bf16, 32/8 heads, d128, page 16)", () -> {
            List<AttentionBench.PrefillRow> rows = new ArrayList<>();
            for (int[] c : PREFILL_CASES) {
                for (AttentionBench.PrefillKernel kernel : AttentionBench.PrefillKernel.on(gpu)) {
                    rows.add(attention.prefill(c[0], c[1], kernel));
                }
            }
            return AttentionBench.prefillTable(rows);
        }) + section("Engine prefill (bf16, Llama-3-8B geometry, 32 layers, random weights, "
                + PrefillBench.TOKEN_BUDGET + "-token step budget)", () -> PrefillBench.table(
                        new PrefillBench(gpu, seed).run(EngineBench.llama3_8b(), 32, PREFILL_CASES)));
    }

    /** The copy bandwidth section; sets {@code rate[0]} to the measured rate, the decode bound's. */
    private static String copyBandwidth(AttentionBench attention, double[] rate) {
        return section("Copy bandwidth (1 GiB device to device, read + write)", () -> {
            rate[0] = attention.copyTerabytesPerSecond();
            return String.format(java.util.Locale.ROOT, "%.2f TB/s%n", rate[0]);
        });
    }

    /**
     * Where a decode step's time goes, measured beside the one-call table: copy bandwidth (first: perf_table.py
     * reads it), the decode attention kernel at the table's 8B decode rows, the projections of both geometries at
     * few rows (cuBLAS and the skinny kernel) and the 8B layer GEMMs at 64 and 256 rows.
     */
    private static String decodeParts(Twin twin) {
        AttentionBench attention = new AttentionBench(twin);
        GemmBench gemm = new GemmBench(twin);
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(attention, rate));
        sb.append(section("Paged decode attention (bf16, 32/8 heads, d128, page 16)", () -> AttentionBench.table(
                attention.run(DECODE_ATTENTION_CASES), rate[0])));
        sb.append(section("Decode projections: cuBLAS against the skinny-matmul kernel (bf16, graphed, weights "
                + "rotated past L2)", () -> GemmBench.skinnyTable(gemm.skinny(SKINNY_ROW_COUNTS), rate[0])));
        sb.append(section("Llama-3-8B layer GEMMs (bf16, cuBLAS through CudaOps.matmul)", () ->
                GemmBench.table(gemm.run(new int[] {64, 256}))));
        return sb.toString();
    }

    /**
     * Copy bandwidth, the decode projections through cuBLAS and through the skinny-matmul kernel, and the engine's
     * decode steps at few requests with the one and the other.
     */
    private static String skinnyTables(Twin twin, CudaDevice gpu, long seed) {
        AttentionBench attention = new AttentionBench(twin);
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(attention, rate));
        sb.append(section("Decode projections: cuBLAS against the skinny-matmul kernel (bf16, graphed, weights "
                + "rotated past L2)", () -> GemmBench.skinnyTable(new GemmBench(twin).skinny(SKINNY_ROW_COUNTS), rate[0])));
        DecodeBench bench = new DecodeBench(gpu, seed);
        sb.append(section("Engine decode, matmuls on cuBLAS against the skinny kernel (bf16, random weights, "
                + DecodeBench.DECODE_STEPS + " timed steps)", () -> {
                    List<DecodeBench.Row> rows = new ArrayList<>(bench.run("8B", EngineBench.llama3_8b(),
                            skinnyCases(new int[][] {{1, 512}, {16, 512}, {1, 16384}})));
                    rows.addAll(bench.run("1B", DecodeBench.llama32_1b(), skinnyCases(new int[][] {{1, 512}, {16, 512}})));
                    return DecodeBench.table(rows, rate[0]);
                }));
        return sb.toString();
    }

    /**
     * Copy bandwidth, decode attention over bf16 and FP8 KV pages at the same cases, the W8A8 GEMMs at prefill rows
     * ({@link Fp8GemmBench}), then the engine on the 8B geometry (32 layers, random weights) with bf16 weights and with
     * the same weights kept in FP8 (quantised at load, one scale a row), weight-only and W8A8: decode steps at batch 1
     * and 64 (512-token prompts, graphs on) against the weights+KV bound, prefill of 16 prompts of 512 tokens, and the
     * FP8 / bf16 ratio of each.
     */
    private static String fp8Tables(Twin twin, CudaDevice gpu, long seed) {
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        AttentionBench attention = new AttentionBench(twin);
        sb.append(copyBandwidth(attention, rate));
        int[][] attentionCases = {{1024, 1}, {1024, 64}, {8192, 1}, {8192, 8}, {8192, 64}};
        sb.append(section("Paged decode attention, bf16 against FP8 (E4M3) KV pages (32/8 heads, d128, page 16)",
                () -> AttentionBench.kvDTypeTable(attention.run(attentionCases, DType.BF16),
                        attention.run(attentionCases, DType.F8_E4M3), rate[0])));
        sb.append(fp8GemmTable(twin, seed));
        Map<WeightQuantization, Double> decode1 = new EnumMap<>(WeightQuantization.class);
        Map<WeightQuantization, Double> decode64 = new EnumMap<>(WeightQuantization.class);
        Map<WeightQuantization, Double> prefill = new EnumMap<>(WeightQuantization.class);
        sb.append(section("Engine decode, bf16 against FP8 weights (Llama-3-8B geometry, random weights, "
                + DecodeBench.DECODE_STEPS + " timed steps)", () -> {
                    List<DecodeBench.Row> rows = new ArrayList<>();
                    for (WeightQuantization q : WeightQuantization.values()) {
                        List<DecodeBench.Row> r = new DecodeBench(gpu, seed, DecodeBench.DECODE_STEPS, q).run(
                                "8B " + (q == WeightQuantization.NONE ? "bf16" : q.flag()), EngineBench.llama3_8b(),
                                List.of(new DecodeBench.Case(1, 512, true), new DecodeBench.Case(64, 512, true)));
                        decode1.put(q, r.get(0).millisPerStep());
                        decode64.put(q, r.get(1).millisPerStep());
                        rows.addAll(r);
                    }
                    return DecodeBench.table(rows, rate[0]);
                }));
        for (WeightQuantization q : WeightQuantization.values()) {
            sb.append(section("Engine prefill, " + (q == WeightQuantization.NONE ? "bf16" : q.flag())
                    + " weights (Llama-3-8B geometry, 32 layers, random weights, " + PrefillBench.TOKEN_BUDGET
                    + "-token step budget)", () -> {
                        List<PrefillBench.Row> rows = new PrefillBench(gpu, seed, q).run(EngineBench.llama3_8b(), 32,
                                new int[][] {{512, 16}}, false);
                        prefill.put(q, rows.get(0).millis());
                        return PrefillBench.table(rows);
                    }));
        }
        for (WeightQuantization q : List.of(WeightQuantization.FP8, WeightQuantization.FP8_W8A8)) {
            sb.append(section(q.flag() + " / bf16 time ratio", () -> String.format(java.util.Locale.ROOT,
                    "decode batch 1: %.3f, decode batch 64: %.3f, prefill 16 x 512: %.3f%n",
                    ratio(decode1, q), ratio(decode64, q), ratio(prefill, q))));
        }
        return sb.toString();
    }

    /**
     * Tensor and expert parallelism: per geometry of --parallel-perf, one GPU against --tensor-parallel GPUs, each
     * beside the bound of its bytes over the devices at the measured copy bandwidth of one.
     */
    private static String parallelTables(Twin twin, long seed, GpuHarnessOptions options) {
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(new AttentionBench(twin), rate));
        ParallelBench bench = new ParallelBench(seed);
        for (String flag : options.parallelGeometries()) {
            ParallelBench.Geometry g = ParallelBench.Geometry.of(flag);
            int layers = options.parallelLayers > 0 ? options.parallelLayers : g.layers;
            sb.append(section("Tensor parallel " + options.tensorParallel + " against one GPU (bf16, " + g.flag
                    + " geometry, " + layers + " layers, random weights, " + ParallelBench.PROMPT + "-token prompts, "
                    + ParallelBench.DECODE_STEPS + " timed eager steps)", () -> ParallelBench.table(
                            bench.run(g, layers, options.tensorParallel), rate[0])));
        }
        return sb.toString();
    }

    /**
     * Copy bandwidth (first: torch_moe.py reads it), moeExperts alone at a sweep of rows on the tensor-core tiles and
     * on cuBLAS GEMMs for each geometry's sparse layer, then the engine rows of both MoE geometries
     * ({@link MoePerf}) into perf-table.tsv, and the MoE threshold the tables ran with.
     */
    private static String moeTables(Twin twin, CudaDevice gpu, long seed, int layers, Path out) {
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(new AttentionBench(twin), rate));
        List<PerfTable.Geometry> geometries = MoePerf.geometries(layers);
        sb.append(section("MoE experts alone: tensor-core tiles against cuBLAS GEMMs (bf16, one sparse "
                + "layer, random experts and routing)", () -> {
                    StringBuilder t = new StringBuilder();
                    for (PerfTable.Geometry g : geometries) {
                        t.append(MoePerf.expertsTable(gpu, seed, g.name(), g.config(), rate[0])).append('\n');
                    }
                    return t.toString();
                }));
        sb.append(section("MoE engine rows (bf16, random weights; MoE experts on cuBLAS from "
                + gpu.options().moeGemmExpertRows() + " rows an expert; joined with the PyTorch peer by torch_moe.py)", () -> {
                    String rows = MoePerf.measure(gpu, seed, geometries);
                    try {
                        Files.writeString(out.resolve("perf-table.tsv"), rows);
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                    return "```\n" + rows + "```\n";
                }));
        return sb.toString();
    }

    /** The W8A8 GEMMs at prefill rows against bf16, with the FP8 dense rate measured first. */
    private static String fp8GemmTable(Twin twin, long seed) {
        return section("W8A8 GEMMs at prefill rows: bf16 cuBLAS, the FP8 x FP8 cuBLASLt GEMM (FP8 rows in; and "
                + "quantising bf16 rows first), Llama-3.1-8B shapes, one scale a weight row and a token", () -> {
                    Fp8GemmBench bench = new Fp8GemmBench(twin, seed);
                    double square = bench.squareTflops();
                    return Fp8GemmBench.table(bench.run(FP8_GEMM_ROWS), square);
                });
    }

    private static double ratio(Map<WeightQuantization, Double> millis, WeightQuantization q) {
        Double fp8 = millis.get(q);
        Double bf16 = millis.get(WeightQuantization.NONE);
        return fp8 == null || bf16 == null ? Double.NaN : fp8 / bf16;
    }

    /**
     * Copy bandwidth, then MLA decode attention ({@link LatentBench}) at its keys and batches against it, and the
     * latent pool's bytes per token as the engine's KV manager allocates it. torch_latent.py reads the kernel rows.
     */
    private static String latentTables(Twin twin) {
        double[] rate = {PEAK_TB_PER_S};
        LatentBench latent = new LatentBench(twin);
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(new AttentionBench(twin), rate));
        sb.append(section("MLA decode attention (bf16, " + LatentBench.HEADS + " heads, latent " + LatentBench.RANK + " + "
                + LatentBench.ROPE + ", page " + LatentBench.PAGE + ")", () -> LatentBench.table(
                        latent.run(LatentBench.CASES), rate[0])));
        sb.append(section("MLA latent pool", () -> latent.poolBytes(1024)));
        return sb.toString();
    }

    /**
     * Copy bandwidth and the rate of the model's largest GEMM (the bounds' rates), then the Bamba engine on Bamba-9B
     * geometry cut to {@code layers} ({@link HybridBench}): decode at batch 1 and 64, prefill of 2048 tokens.
     * torch_hybrid.py reads the engine rows.
     */
    private static String hybridTables(Twin twin, CudaDevice gpu, long seed, int layers) {
        double[] rate = {PEAK_TB_PER_S};
        double[] gemmRate = {Double.NaN};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(new AttentionBench(twin), rate));
        sb.append(section("GEMM rate: the MLP's gate/up at " + HybridBench.PREFILL_TOKENS + " rows (bf16, cuBLAS)", () -> {
            GemmBench.Row r = new GemmBench(twin).measure("gate/up", HybridBench.PREFILL_TOKENS, 2 * 14_336, 4096);
            gemmRate[0] = r.tflops();
            return String.format(java.util.Locale.ROOT, "%.1f µs, %.0f TFLOP/s%n", r.micros(), r.tflops());
        }));
        List<HybridBench.DecodeRow> decode = new ArrayList<>();
        List<HybridBench.PrefillRow> prefill = new ArrayList<>();
        String title = "(bf16, Bamba-9B geometry, " + layers + " layers, random weights)";
        String failure = "";
        try {
            new HybridBench(gpu, seed).run(HybridBench.bamba9b(layers), new int[] {1, 64}, decode, prefill);
        } catch (RuntimeException e) {
            failure = "failed: " + e + "\n";
        }
        String note = failure;
        sb.append(section("Hybrid engine decode " + title + ", " + HybridBench.DECODE_STEPS + " timed steps",
                () -> HybridBench.decodeTable(decode, rate[0]) + note));
        sb.append(section("Hybrid engine prefill " + title, () -> HybridBench.prefillTable(prefill, gemmRate[0]) + note));
        return sb.toString();
    }

    /**
     * Decode steps of one case for a kernel profiler to record: the prefill, the warm-up steps and
     * {@value #PROFILED_DECODE_STEPS} steps (a step's kernels start with the embedding gather, so the profile's last
     * step is what follows its last gather).
     */
    private static void profileDecode(CudaDevice gpu, long seed, GpuHarnessOptions.ProfiledDecode profiled) {
        if (profiled.model().equals("BAMBA")) {
            // the hybrid bench's own steps and context (HybridBench.CONTEXT), the harness's --hybrid-perf geometry
            HybridBench.DecodeRow row = new HybridBench(gpu, seed).decodeOnly(HybridBench.bamba9b(PROFILED_HYBRID_LAYERS),
                    profiled.batch());
            System.out.printf(java.util.Locale.ROOT, "profiled decode %s (context %d): %.2f ms/step%n", profiled,
                    HybridBench.CONTEXT, row.millisPerStep());
            return;
        }
        ModelConfig config = switch (profiled.model()) {
            case "8B" -> EngineBench.llama3_8b();
            case "QWEN3MOE" -> MoePerf.qwen3_30b_a3b(PROFILED_MOE_LAYERS);
            case "DSV2L" -> MoePerf.deepseekV2Lite(PROFILED_MOE_LAYERS);
            default -> DecodeBench.llama32_1b();
        };
        DecodeBench.Case c = new DecodeBench.Case(profiled.batch(), profiled.context(), true);
        DecodeBench.Row row = new DecodeBench(gpu, seed, PROFILED_DECODE_STEPS).run(profiled.model(), config, List.of(c))
                .get(0);
        System.out.printf(java.util.Locale.ROOT, "profiled decode %s: %.2f ms/step%n", profiled, row.millisPerStep());
    }

    /** Engine decode steps with the graphs' kernels launched in plain stream order against programmatically. */
    private static String launchTables(Twin twin, CudaDevice gpu, long seed) {
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(new AttentionBench(twin), rate));
        DecodeBench bench = new DecodeBench(gpu, seed);
        sb.append(section("Engine decode, decode graphs in plain stream order against programmatic launch (bf16, "
                + "random weights, " + DecodeBench.DECODE_STEPS + " timed steps)", () -> {
                    List<DecodeBench.Row> rows = new ArrayList<>(bench.run("8B", EngineBench.llama3_8b(),
                            launchCases(LAUNCH_ROWS)));
                    rows.addAll(bench.run("1B", DecodeBench.llama32_1b(), launchCases(LAUNCH_ROWS)));
                    return DecodeBench.table(rows, rate[0]);
                }));
        return sb.toString();
    }

    private static List<DecodeBench.Case> launchCases(int[][] batchAndContext) {
        List<DecodeBench.Case> cases = new ArrayList<>();
        for (boolean programmatic : new boolean[] {false, true}) {
            for (int[] bc : batchAndContext) {
                cases.add(new DecodeBench.Case(bc[0], bc[1], true, -1, programmatic));
            }
        }
        return cases;
    }

    /**
     * The decode tables: copy bandwidth (the bound's rate), the decode attention kernel and the projections
     * at the 8B engine rows' shapes (where a step's time goes; with 8B among {@code models}), then the engine rows.
     */
    private static String decodeTables(Twin twin, CudaDevice gpu, long seed, List<String> models) {
        AttentionBench attention = new AttentionBench(twin);
        GemmBench gemm = new GemmBench(twin);
        double[] rate = {PEAK_TB_PER_S};
        StringBuilder sb = new StringBuilder("\n");
        sb.append(copyBandwidth(attention, rate));
        if (models.contains("8B")) {
            sb.append(section("Paged decode attention (bf16, 32/8 heads, d128, page 16)", () -> AttentionBench.table(
                    attention.run(DECODE_ATTENTION_CASES), rate[0])));
            sb.append(section("Llama-3-8B layer GEMMs (bf16, cuBLAS through CudaOps.matmul)", () ->
                    GemmBench.table(gemm.run(new int[] {1, 16, 64, 256}))));
        }
        DecodeBench bench = new DecodeBench(gpu, seed);
        sb.append(section("Engine decode (bf16, random weights, " + DecodeBench.DECODE_STEPS + " timed steps)", () -> {
            List<DecodeBench.Row> rows = new ArrayList<>();
            if (models.contains("8B")) {
                rows.addAll(bench.run("8B", EngineBench.llama3_8b(), DECODE_8B));
            }
            if (models.contains("1B")) {
                rows.addAll(bench.run("1B", DecodeBench.llama32_1b(), DECODE_1B));
            }
            return DecodeBench.table(rows, rate[0]);
        }));
        return sb.toString();
    }

    /**
     * Engine decode at batch {@value GpuHarnessOptions#LORA_BATCH} and {@value #LORA_CONTEXT} keys on Llama-3-8B
     * geometry, without adapters and with each count of distinct adapters ({@link LoraBench}; adapters in a temporary
     * folder removed afterwards), decode graphs on and off.
     */
    private static String loraTables(CudaDevice gpu, long seed, int[] adapterCounts) {
        int[] counts = IntStream.concat(IntStream.of(0), Arrays.stream(adapterCounts)).distinct().toArray();
        return section("Engine decode with LoRA adapters (bf16, Llama-3-8B geometry, random weights, rank "
                + LoraBench.RANK + " on " + String.join("/", LoraBench.MODULES) + ", " + DecodeBench.DECODE_STEPS
                + " timed steps)", () -> inTemporaryFolder("mstar-lora-bench", dir -> LoraBench.table(
                        new LoraBench(gpu, seed).run(EngineBench.llama3_8b(), GpuHarnessOptions.LORA_BATCH, LORA_CONTEXT,
                                counts, new boolean[] {true, false}, dir.resolve("adapters")))));
    }

    /** The LoRA engine rows ({@link LoraChecks}) added to {@code checks}; returns their notes. */
    private static String loraChecks(CudaDevice gpu, CpuDevice cpu, long seed, List<CheckResult> checks) {
        LoraChecks lora = new LoraChecks(cpu, gpu, EngineChecks.geometry(), seed);
        CheckResult.attempt(checks, "engine with adapters", () -> checks.addAll(inTemporaryFolder("mstar-lora-checks",
                lora::run)));
        return lora.notes();
    }

    /** What {@code body} returns from a fresh temporary folder, removed afterwards. */
    private static <T> T inTemporaryFolder(String prefix, IoFunction<T> body) {
        try {
            Path dir = Files.createTempDirectory(prefix);
            try {
                return body.apply(dir);
            } finally {
                try (Stream<Path> files = Files.walk(dir)) {
                    files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private interface IoFunction<T> {
        T apply(Path dir) throws IOException;
    }

    /**
     * Adds the whole-model rows ({@link EngineChecks}, checkpoint in a temporary folder removed afterwards) to
     * {@code checks}; returns their notes.
     */
    private static String engineChecks(CudaDevice gpu, CpuDevice cpu, long seed, List<CheckResult> checks) {
        StringBuilder notes = new StringBuilder();
        for (ModelConfig geometry : EngineChecks.geometries()) {
            notes.append(engineChecks(gpu, cpu, geometry, seed, 0, checks));
            if (geometry.architecture() == Architecture.GEMMA3) {
                // its windowed layers again on a cache of their own, each request keeping its window
                notes.append(engineChecks(gpu, cpu, geometry, seed, 160, checks));
            }
        }
        return notes.toString();
    }

    private static String engineChecks(CudaDevice gpu, CpuDevice cpu, ModelConfig geometry, long seed,
                                       int windowedLayerPages, List<CheckResult> checks) {
        EngineChecks engine = new EngineChecks(cpu, gpu, geometry, seed, windowedLayerPages);
        CheckResult.attempt(checks, "engine " + geometry.architecture().modelType(),
                () -> checks.addAll(inTemporaryFolder("mstar-engine-checks", engine::run)));
        return engine.notes();
    }
}
