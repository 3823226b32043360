package org.mstar.device.cuda.harness;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.List;
import java.util.function.Supplier;
import org.mstar.device.DType;
import org.mstar.device.cuda.CudaDevice;
import org.mstar.model.whisper.WhisperConfig;

/**
 * Plain {@code java -cp} entry for Whisper on the GPU machine: fidelity of the CUDA engine in fp32 and bf16 against
 * transformers' fp32 outputs on the tiny checkpoint ({@link WhisperChecks}), and, in each dtype, the engine with
 * decode graphs against itself eager; then, unless {@code --no-perf}, decode throughput on random weights of
 * whisper-small and whisper-large-v3 geometry ({@link WhisperBench}), eager and, at batch 1 and 16, with decode
 * graphs. Prints the tables and writes them to {@code OUT/whisper.md} (the checks) and {@code OUT/whisper-perf.md},
 * each section as soon as it is done. {@code --perf-only} skips the checks. Exits 1 when the fp32 run is off
 * (relative error of any quantity above 1e-4, or tokens that differ) or decode graphs are (a logit row off eager's
 * by more than {@link EngineChecks#GRAPHS_TOLERANCE}, or tokens that differ).
 *
 * {@code --profile-decode MODEL:BATCH} runs only a few graphed decode steps of one geometry, for Nsight Compute.
 *
 * <pre>java -cp 'jars/*' org.mstar.device.cuda.harness.WhisperHarness --fixture DIR --out DIR [--no-perf | --perf-only]</pre>
 */
public final class WhisperHarness {
    private static final double PEAK_TB_PER_S = 4.3;
    private static final double FP32_TOLERANCE = 1e-4;
    /** Decode steps timed under a kernel profiler (each kernel of each step is profiled on its own). */
    private static final int PROFILED_STEPS = 3;

    private WhisperHarness() {}

    private static String section(String title, Supplier<String> table) {
        String body;
        try {
            body = table.get();
        } catch (RuntimeException | LinkageError e) {
            e.printStackTrace();
            body = "failed: " + e + "\n";
        }
        String s = "\n## " + title + "\n\n" + body;
        System.out.println(s);
        return s;
    }

    public static void main(String[] args) throws Exception {
        WhisperHarnessOptions options = HarnessCommandLine.parseOrExit(new WhisperHarnessOptions(), args);
        Path fixture = options.fixture;
        Path out = options.out;
        boolean perf = !options.noPerf;
        boolean checks = !options.perfOnly;
        Files.createDirectories(out);
        boolean[] fp32Passed = {!checks};
        boolean[] graphsPassed = {true};
        StringBuilder report = new StringBuilder("date " + LocalDate.now() + "\n");
        try (CudaDevice gpu = new CudaDevice(0)) {
            if (options.profiled != null) {
                String[] spec = options.profiled.split(":");
                WhisperConfig config = spec[0].equals("small") ? WhisperConfig.small() : WhisperConfig.largeV3();
                System.out.println(WhisperBench.table(new WhisperBench(gpu, 2026, PROFILED_STEPS).run(
                        "whisper-" + spec[0], config, new int[0], new int[] {Integer.parseInt(spec[1])}), PEAK_TB_PER_S));
                return;
            }
            report.append("device ").append(gpu.name()).append('\n');
            WhisperChecks fidelity = new WhisperChecks(fixture);
            for (DType dtype : checks ? new DType[] {DType.F32, DType.BF16} : new DType[0]) {
                report.append(section("Whisper fidelity, " + dtype + " weights and activations, vs transformers fp32",
                        () -> {
                            try {
                                List<WhisperChecks.Row> rows = fidelity.run(gpu, dtype);
                                if (dtype == DType.F32) {
                                    fp32Passed[0] = rows.stream().allMatch(r -> r.relError() <= FP32_TOLERANCE
                                            && (r.tokens() == null || r.tokens().startsWith("identical")));
                                }
                                return WhisperChecks.table("quantity", rows);
                            } catch (java.io.IOException e) {
                                throw new java.io.UncheckedIOException(e);
                            }
                        }));
                report.append(section("Whisper decode graphs vs eager, " + dtype + " weights and activations", () -> {
                    try {
                        List<WhisperChecks.Row> rows = fidelity.graphsAgainstEager(gpu, dtype);
                        graphsPassed[0] &= rows.stream().allMatch(r -> r.relError() <= EngineChecks.GRAPHS_TOLERANCE
                                && r.tokens().startsWith("identical"));
                        return WhisperChecks.table("quantity", rows);
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    } catch (RuntimeException e) {
                        graphsPassed[0] = false;
                        throw e;
                    }
                }));
                Files.writeString(out.resolve("whisper.md"), report);
            }
            if (perf) {
                WhisperBench bench = new WhisperBench(gpu, 2026, WhisperBench.DECODE_STEPS);
                StringBuilder tables = new StringBuilder(report);
                int[] graphed = {1, 16};
                for (Object[] geometry : new Object[][] {{"whisper-small", WhisperConfig.small(), new int[] {1, 16, 64}},
                        {"whisper-large-v3", WhisperConfig.largeV3(), new int[] {1, 16}}}) {
                    tables.append(section(geometry[0] + " decode throughput (bf16, random weights, 30 s requests)", () ->
                            WhisperBench.table(bench.run((String) geometry[0], (WhisperConfig) geometry[1],
                                    (int[]) geometry[2], graphed), PEAK_TB_PER_S)));
                    Files.writeString(out.resolve("whisper-perf.md"), tables);
                }
            }
        }
        System.out.println(fp32Passed[0] ? "whisper fp32 checks passed" : "whisper fp32 checks FAILED");
        System.out.println(graphsPassed[0] ? "whisper decode graph checks passed" : "whisper decode graph checks FAILED");
        System.exit(fp32Passed[0] && graphsPassed[0] ? 0 : 1);
    }
}
