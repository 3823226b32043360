package org.mstar.device.cuda.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.device.cuda.CudaDevice;

/**
 * Plain {@code java -cp} entry for the GPU machine (which has no build tools): runs every CUDA op against
 * the CPU reference on fresh random inputs with poisoned outputs and prints a table; then, unless
 * {@code --no-perf}, the first performance tables (paged decode attention, the GEMMs of a Llama-3-8B layer,
 * GEMM batch invariance). Tables are also written as markdown under {@code --out}. Exits 1 when a check fails.
 *
 * <pre>java -cp 'jars/*' org.mstar.device.cuda.harness.GpuHarness --out /tmp/out [--seed N] [--no-perf]</pre>
 */
public final class GpuHarness {
    /** The copy bandwidth measured on this workplace's H200s (read + write), the decode roofline. */
    private static final double PEAK_TB_PER_S = 4.3;

    private GpuHarness() {}

    /** One titled markdown table, printed as soon as it is measured; a failure is reported in its place. */
    private static String section(String title, Supplier<String> table) {
        String body;
        try {
            body = table.get();
        } catch (RuntimeException e) {
            body = "failed: " + e + "\n";
        }
        String s = "\n## " + title + "\n\n" + body;
        System.out.println(s);
        return s;
    }

    public static void main(String[] args) throws IOException {
        Path out = Path.of(".");
        long seed = System.nanoTime();
        boolean perf = true;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--out" -> out = Path.of(args[++i]);
                case "--seed" -> seed = Long.parseLong(args[++i]);
                case "--no-perf" -> perf = false;
                default -> throw new IllegalArgumentException("unknown argument " + args[i]
                        + " (accepted: --out DIR, --seed N, --no-perf)");
            }
        }
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
            checks.addAll(new OpChecks(twin).run());
            checks.addAll(new AttentionChecks(twin).run());
            checks.addAll(new SamplingChecks(twin).run());
            String table = CheckResult.table(checks);
            long failed = checks.stream().filter(c -> !c.passed()).count();
            String summary = checks.size() - failed + " of " + checks.size() + " checks passed\n";
            System.out.println(table);
            System.out.print(summary);
            Files.writeString(out.resolve("harness.md"), header + "\n" + table + "\n" + summary);
            allPassed = failed == 0;

            if (perf) {
                GemmBench gemm = new GemmBench(twin);
                AttentionBench attention = new AttentionBench(twin);
                String tables = header + "\n"
                        + section("Copy bandwidth (1 GiB device to device, read + write)", () ->
                                String.format(java.util.Locale.ROOT, "%.2f TB/s%n", attention.copyTerabytesPerSecond()))
                        + section("Paged decode attention (bf16, 32/8 heads, d128, page 16)", () ->
                                AttentionBench.table(attention.run(new int[][] {
                                    {1024, 1}, {1024, 64}, {8192, 1}, {8192, 8}, {32768, 1}, {32768, 2}}),
                                        PEAK_TB_PER_S))
                        + section("Paged prefill attention (bf16, 32/8 heads, d128, page 16)", () ->
                                AttentionBench.prefillTable(List.of(attention.prefill(1024), attention.prefill(4096))))
                        + section("Llama-3-8B layer GEMMs (bf16, cuBLAS through CudaOps.matmul)", () ->
                                GemmBench.table(gemm.run(new int[] {1, 16, 128, 1024, 4096})))
                        + section("GEMM batch invariance (row r at batch M vs alone)", () ->
                                GemmBench.invarianceTable(gemm.batchInvariance(new int[] {1, 2, 4, 8, 16, 32, 64, 128,
                                    256, 1024, 4096})));
                Files.writeString(out.resolve("perf.md"), tables);
            }
        }
        System.exit(allPassed ? 0 : 1);
    }
}
