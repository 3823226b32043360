package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.mstar.device.KernelOptions;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;

/** The harnesses' command lines, parsed only: no GPU is touched. */
class HarnessCommandLineTest {
    @Test
    void gpuHarnessDefaultsRunChecksAndTheDefaultTables() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options);
        assertThat(options.out).isEqualTo(Path.of("."));
        assertThat(options.perf()).isTrue();
        assertThat(options.replacesTables()).isFalse();
        assertThat(options.noChecks).isFalse();
        assertThat(options.noKernelPerf).isFalse();
        assertThat(options.noQkvRopeInMatmul).isFalse();
        assertThat(options.engineLayers()).containsExactly(8, 32);
        assertThat(options.moeLayers()).isZero();
        assertThat(options.tables()).isEmpty();
        assertThat(options.moeGemmExpertRows).isEqualTo(KernelOptions.DEFAULT_MOE_GEMM_EXPERT_ROWS);
        assertThat(options.decodeModels).containsExactly("8B", "1B");
        assertThat(options.profiled).isEmpty();
        assertThat(options.parallelGeometries()).isEmpty();
        assertThat(options.loraAdapters).containsExactly(8, 64);
    }

    @Test
    void loraPerfReplacesTheTablesWithItsAdapterCounts() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--lora-perf", "--lora-adapters", "1,16");
        assertThat(options.tables()).contains(PerfSwitch.LORA);
        assertThat(options.replacesTables()).isTrue();
        assertThat(options.loraAdapters).containsExactly(1, 16);
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--no-perf", "--lora-perf");
        assertRefused(new GpuHarnessOptions(), "--lora-adapters counts must be 1..64 (the batch), got 65",
                "--lora-perf", "--lora-adapters", "8,65");
    }

    @Test
    void gpuHarnessReadsEverySwitch() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--out", "/tmp/o", "--seed", "42", "--no-kernel-perf", "--engine-layers", "4,16",
                "--decode-perf", "--decode-models", "1B", "--frame-perf", "--preplan-perf", "--launch-perf",
                "--profile-decode", "8B:1:512,1B:64:4096", "--no-qkv-rope-in-matmul", "--no-checks");
        assertThat(options.out).isEqualTo(Path.of("/tmp/o"));
        assertThat(options.seed).isEqualTo(42);
        assertThat(options.noKernelPerf).isTrue();
        assertThat(options.engineLayers()).containsExactly(4, 16);
        assertThat(options.moeLayers()).isEqualTo(4);
        assertThat(options.tables()).contains(PerfSwitch.DECODE);
        assertThat(options.replacesTables()).isTrue();
        assertThat(options.decodeModels).containsExactly("1B");
        assertThat(options.framePerf).isTrue();
        assertThat(options.preplanPerf).isTrue();
        assertThat(options.launchPerf).isTrue();
        assertThat(options.profiled).containsExactly(new GpuHarnessOptions.ProfiledDecode("8B", 1, 512),
                new GpuHarnessOptions.ProfiledDecode("1B", 64, 4096));
        assertThat(options.profiled.get(0)).hasToString("8B:1:512");
        assertThat(options.noQkvRopeInMatmul).isTrue();
        assertThat(options.noChecks).isTrue();
    }

    @Test
    void attentionOnlyLeavesThePerformanceTablesOut() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--attention-only");
        assertThat(options.attentionOnly).isTrue();
        assertThat(options.perf()).isFalse();
    }

    @Test
    void moeOnlyLeavesThePerformanceTablesOut() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--moe-only");
        assertThat(options.moeOnly).isTrue();
        assertThat(options.perf()).isFalse();
    }

    @Test
    void stateSpaceOnlyRunsItsFamilyAloneWithoutThePerformanceTables() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--state-space-only");
        assertThat(options.perf()).isFalse();
        assertThat(options.runs(options.stateSpaceOnly)).isTrue();
        assertThat(options.runs(options.moeOnly)).isFalse();
        assertThat(options.runs(false)).isFalse();
        assertThat(new GpuHarnessOptions().runs(false)).isTrue();
    }

    @Test
    void fp8PerfReplacesTheDefaultTablesAndFp8OnlyRunsItsFamilyAlone() {
        GpuHarnessOptions perf = new GpuHarnessOptions();
        HarnessCommandLine.parse(perf, "--fp8-perf");
        assertThat(perf.tables()).contains(PerfSwitch.FP8);
        assertThat(perf.replacesTables()).isTrue();
        GpuHarnessOptions gemm = new GpuHarnessOptions();
        HarnessCommandLine.parse(gemm, "--fp8-gemm-perf", "--no-checks");
        assertThat(gemm.tables()).contains(PerfSwitch.FP8_GEMM);
        assertThat(gemm.replacesTables()).isTrue();
        GpuHarnessOptions only = new GpuHarnessOptions();
        HarnessCommandLine.parse(only, "--fp8-only");
        assertThat(only.perf()).isFalse();
        assertThat(only.runs(only.fp8Only)).isTrue();
        assertThat(only.runs(false)).isFalse();
        GpuHarnessOptions engine = new GpuHarnessOptions();
        HarnessCommandLine.parse(engine, "--engine-only");
        assertThat(engine.perf()).isFalse();
        assertThat(engine.runs(engine.engineOnly)).isTrue();
        assertThat(engine.runs(engine.fp8Only)).isFalse();
        GpuHarnessOptions ops = new GpuHarnessOptions();
        HarnessCommandLine.parse(ops, "--ops-only");
        assertThat(ops.runs(ops.opsOnly)).isTrue();
        assertThat(ops.runs(ops.engineOnly)).isFalse();
    }

    @Test
    void gpuHarnessRefusesWhatItCannotRun() {
        assertRefused(new GpuHarnessOptions(), "Unknown option: '--bogus'", "--bogus");
        assertRefused(new GpuHarnessOptions(), "Missing required parameter for option '--out'", "--out");
        assertRefused(new GpuHarnessOptions(), "'x'", "--seed", "x");
        assertRefused(new GpuHarnessOptions(), "MODEL:BATCH:CONTEXT with MODEL 8B, 1B, QWEN3MOE, DSV2L or BAMBA, got 70B:1:512",
                "--profile-decode", "70B:1:512");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--no-perf", "--prefill-perf");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--attention-only", "--skinny-perf");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--moe-only", "--decode-perf");
        assertRefused(new GpuHarnessOptions(), "give one of them", "--attention-only", "--moe-only");
        assertRefused(new GpuHarnessOptions(), "give one of them", "--moe-only", "--state-space-only");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--state-space-only", "--prefill-perf");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--no-perf", "--fp8-perf");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--fp8-only", "--fp8-gemm-perf");
        assertRefused(new GpuHarnessOptions(), "give one of them", "--moe-only", "--fp8-only");
        assertRefused(new GpuHarnessOptions(), "give one of them", "--engine-only", "--fp8-only");
        assertRefused(new GpuHarnessOptions(), "give one of them", "--ops-only", "--engine-only");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--no-perf", "--parallel-perf", "8B");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--no-perf", "--latent-perf");
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--state-space-only", "--hybrid-perf");
        assertRefused(new GpuHarnessOptions(), "--hybrid-layers must be 1..32, got 33", "--hybrid-perf",
                "--hybrid-layers", "33");
    }

    @Test
    void everyTableSwitchReplacesTheTablesAndIsRefusedWithoutThem() {
        for (PerfSwitch s : PerfSwitch.values()) {
            String[] given = s == PerfSwitch.PARALLEL ? new String[] {s.flag, "8B"} : new String[] {s.flag};
            GpuHarnessOptions options = new GpuHarnessOptions();
            HarnessCommandLine.parse(options, given);
            assertThat(options.tables()).as(s.flag).contains(s);
            assertThat(options.given(s)).as(s.flag).isTrue();
            assertThat(options.replacesTables()).as(s.flag).isTrue();
            for (String alone : new String[] {"--no-perf", "--attention-only", "--moe-only", "--state-space-only",
                "--fp8-only", "--ops-only", "--engine-only"}) {
                String[] refused = Stream.concat(Stream.of(alone), Arrays.stream(given)).toArray(String[]::new);
                assertRefused(new GpuHarnessOptions(), s.flag, refused);
                assertRefused(new GpuHarnessOptions(), "are performance tables: drop --no-perf (and --attention-only, "
                        + "--moe-only, --state-space-only, --fp8-only, --ops-only, --engine-only) to run them", refused);
            }
        }
        GpuHarnessOptions perfTable = new GpuHarnessOptions();
        HarnessCommandLine.parse(perfTable, "--no-perf", "--perf-table");
        assertThat(perfTable.replacesTables()).isTrue();
        assertThat(perfTable.tables()).isEmpty();
    }

    @Test
    void ofSeveralTableSwitchesTheFirstInPrecedenceRuns() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--decode-perf", "--moe-perf", "--parallel-perf", "8B,70B", "--parallel-perf",
                "moe");
        assertThat(options.tables()).contains(PerfSwitch.PARALLEL);
        assertThat(options.given(PerfSwitch.DECODE)).isTrue();
        assertThat(options.given(PerfSwitch.PREFILL)).isFalse();
        assertThat(options.parallelGeometries()).containsExactly("8B", "70B", "moe");
    }

    @Test
    void latentAndHybridPerfReplaceTheDefaultTables() {
        GpuHarnessOptions latent = new GpuHarnessOptions();
        HarnessCommandLine.parse(latent, "--latent-perf");
        assertThat(latent.tables()).contains(PerfSwitch.LATENT);
        assertThat(latent.replacesTables()).isTrue();
        GpuHarnessOptions hybrid = new GpuHarnessOptions();
        HarnessCommandLine.parse(hybrid, "--hybrid-perf", "--hybrid-layers", "8", "--no-checks");
        assertThat(hybrid.tables()).contains(PerfSwitch.HYBRID);
        assertThat(hybrid.hybridLayers).isEqualTo(8);
        assertThat(hybrid.replacesTables()).isTrue();
        assertThat(hybrid.runs(false)).isFalse();
    }

    @Test
    void moePerfReplacesTheTablesAndTakesItsThreshold() {
        GpuHarnessOptions options = new GpuHarnessOptions();
        HarnessCommandLine.parse(options, "--moe-perf", "--moe-gemm-expert-rows", "1024", "--engine-layers", "24");
        assertThat(options.tables()).contains(PerfSwitch.MOE);
        assertThat(options.replacesTables()).isTrue();
        assertThat(options.moeGemmExpertRows).isEqualTo(1024);
        assertThat(options.moeLayers()).isEqualTo(24);
        assertRefused(new GpuHarnessOptions(), "drop --no-perf", "--no-perf", "--moe-perf");
        assertRefused(new GpuHarnessOptions(), "--moe-gemm-expert-rows must be at least 0, got -1", "--moe-gemm-expert-rows", "-1");
        assertRefused(new GpuHarnessOptions(), "--engine-layers counts must be at least 1, got 0", "--engine-layers", "0");
    }

    @Test
    void gpuHarnessHelpNamesEveryOptionWithOneLine() {
        CommandLine line = HarnessCommandLine.parse(new GpuHarnessOptions(), "--help");
        assertThat(line.isUsageHelpRequested()).isTrue();
        assertThat(line.getCommandSpec().options()).extracting(OptionSpec::longestName).containsExactly(
                "--out", "--seed", "--no-perf", "--no-kernel-perf", "--engine-layers", "--prefill-perf", "--decode-perf",
                "--decode-models", "--invariance-perf", "--skinny-perf", "--fp8-perf", "--fp8-gemm-perf",
                "--parallel-perf", "--tensor-parallel", "--parallel-layers", "--latent-perf", "--hybrid-perf",
                "--hybrid-layers", "--moe-perf", "--moe-gemm-expert-rows", "--fp8-only", "--attention-only",
                "--moe-only", "--state-space-only", "--ops-only", "--engine-only", "--frame-perf", "--preplan-perf", "--perf-table", "--launch-perf",
                "--profile-decode", "--warpgroup-attention", "--no-qkv-rope-in-matmul", "--lora-perf", "--lora-adapters", "--no-checks",
                "--help");
        assertEveryOptionOnOneUsageLine(line);
    }

    @Test
    void whisperHarnessNeedsItsFixtureUnlessPerfOnly() {
        WhisperHarnessOptions options = new WhisperHarnessOptions();
        HarnessCommandLine.parse(options, "--fixture", "fx", "--out", "o", "--no-perf");
        assertThat(options.fixture).isEqualTo(Path.of("fx"));
        assertThat(options.out).isEqualTo(Path.of("o"));
        assertThat(options.noPerf).isTrue();
        assertThat(options.perfOnly).isFalse();

        WhisperHarnessOptions perfOnly = new WhisperHarnessOptions();
        HarnessCommandLine.parse(perfOnly, "--perf-only");
        assertThat(perfOnly.perfOnly).isTrue();
        assertThat(perfOnly.out).isEqualTo(Path.of("."));

        assertRefused(new WhisperHarnessOptions(), "--fixture DIR", "--no-perf");
        assertRefused(new WhisperHarnessOptions(), "Unknown option: '--bogus'", "--perf-only", "--bogus");
        assertEveryOptionOnOneUsageLine(HarnessCommandLine.parse(new WhisperHarnessOptions(), "--help"));

        WhisperHarnessOptions profiled = new WhisperHarnessOptions();
        HarnessCommandLine.parse(profiled, "--profile-decode", "large-v3:16");
        assertThat(profiled.profiled).isEqualTo("large-v3:16");
        assertRefused(new WhisperHarnessOptions(), "MODEL:BATCH", "--profile-decode", "medium:16");
    }

    private static void assertRefused(HarnessCommandLine.Options options, String message, String... args) {
        assertThatThrownBy(() -> HarnessCommandLine.parse(options, args)).isInstanceOf(ParameterException.class)
                .hasMessageContaining(message);
    }

    /** The usage lists each option once, its description on the same line and on no other. */
    private static void assertEveryOptionOnOneUsageLine(CommandLine line) {
        List<String> usage = line.getUsageMessage(CommandLine.Help.Ansi.OFF).lines().toList();
        for (OptionSpec option : line.getCommandSpec().options()) {
            assertThat(option.description()).as(option.longestName()).hasSize(1);
            String description = option.description()[0].replace("${DEFAULT-VALUE}", option.defaultValue() + "");
            assertThat(usage).as(option.longestName())
                    .anySatisfy(l -> assertThat(l).contains(option.longestName()).endsWith(description));
        }
    }
}
