package org.mstar.device.cuda.harness;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.mstar.device.KernelOptions;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.TypeConversionException;

/** {@link GpuHarness}'s command line. */
@Command(name = "GpuHarness", sortOptions = false, abbreviateSynopsis = true,
        description = "Every CUDA op and the whole engine against the CPU reference, then the performance tables.")
final class GpuHarnessOptions implements HarnessCommandLine.Options {
    /** Requests of the --lora-perf rows: the decode batch. */
    static final int LORA_BATCH = 64;

    @Option(names = "--out", paramLabel = "DIR",
            description = "folder of harness.md, perf.md and perf-table.tsv (default: the working directory)")
    Path out = Path.of(".");

    @Option(names = "--seed", paramLabel = "N", description = "seed of the random inputs and weights (default: the clock)")
    long seed = System.nanoTime();

    @Option(names = "--no-perf", description = "the checks only, no performance table")
    boolean noPerf;

    @Option(names = "--no-kernel-perf",
            description = "no kernel tables (attention, GEMMs, GEMM batch invariance); the engine throughput stays")
    boolean noKernelPerf;

    @Option(names = "--engine-layers", paramLabel = "LAYERS", split = ",",
            description = "layer counts of the engine throughput (default: 8,32); the first cuts --moe-perf's models")
    int[] engineLayers = {};

    @Option(names = "--decode-models", paramLabel = "MODEL", split = ",", defaultValue = "8B,1B",
            description = "the geometries whose engine rows --decode-perf runs (default: ${DEFAULT-VALUE})")
    List<String> decodeModels;

    @Option(names = "--tensor-parallel", paramLabel = "N", defaultValue = "2",
            description = "GPUs of the --parallel-perf rows, cuda:0 on (default: ${DEFAULT-VALUE})")
    int tensorParallel;

    @Option(names = "--parallel-layers", paramLabel = "L", defaultValue = "0",
            description = "layers of the --parallel-perf geometries (default: 8B 32, 70B 16, moe 16)")
    int parallelLayers;

    @Option(names = "--hybrid-layers", paramLabel = "N", defaultValue = "32",
            description = "layers of the --hybrid-perf model, its first N of Bamba-9B's 32 (default: ${DEFAULT-VALUE})")
    int hybridLayers;

    @Option(names = "--moe-gemm-expert-rows", paramLabel = "ROWS",
            description = "mean rows an expert from which MoE experts run on cuBLAS GEMMs instead of tensor-core tiles (default: "
                    + KernelOptions.DEFAULT_MOE_GEMM_EXPERT_ROWS + ")")
    int moeGemmExpertRows = KernelOptions.DEFAULT_MOE_GEMM_EXPERT_ROWS;

    @Option(names = "--fp8-only", description = "the FP8-weight and FP8-KV checks alone, no performance table")
    boolean fp8Only;

    @Option(names = "--attention-only", description = "the attention checks (paged, ragged, cross) alone, no performance table")
    boolean attentionOnly;

    @Option(names = "--moe-only", description = "the mixture-of-experts checks (router, experts) alone, no performance table")
    boolean moeOnly;

    @Option(names = "--state-space-only", description = "the Mamba2 op and engine checks alone, no performance table")
    boolean stateSpaceOnly;

    @Option(names = "--ops-only",
            description = "the op checks (matmuls, norms, RoPE and KV appends, elementwise ops) alone, no performance table")
    boolean opsOnly;

    @Option(names = "--engine-only",
            description = "the engine checks (every model family against the CPU engine, adapters, batch invariance) alone, "
                    + "no performance table")
    boolean engineOnly;

    @Option(names = "--frame-perf", description = "adds the frame-stream throughput")
    boolean framePerf;

    @Option(names = "--preplan-perf", description = "adds decode steps with pre-planning off and on")
    boolean preplanPerf;

    @Option(names = "--perf-table",
            description = "instead of every table: the one-call table's rows, also written as perf-table.tsv")
    boolean perfTable;

    @Option(names = "--launch-perf",
            description = "adds decode steps with the graphs' kernels in plain stream order and launched programmatically")
    boolean launchPerf;

    @Option(names = "--profile-decode", paramLabel = "CASE", split = ",", converter = ProfiledDecode.Converter.class,
            description = "decode steps of each CASE, MODEL:BATCH:CONTEXT (8B, 1B, QWEN3MOE, DSV2L, BAMBA), for a profiler")
    List<ProfiledDecode> profiled = List.of();

    @Option(names = "--warpgroup-attention",
            description = "tables with bf16 prefill attention on Hopper's warpgroup kernel (off by default)")
    boolean warpgroupAttention;

    @Option(names = "--no-qkv-rope-in-matmul",
            description = "tables with qkv_rope_append after the qkv projection, not in the skinny matmul's epilogue")
    boolean noQkvRopeInMatmul;

    @Option(names = "--lora-adapters", paramLabel = "N", split = ",", defaultValue = "8,64",
            description = "distinct adapters in the batch of the --lora-perf rows (default: ${DEFAULT-VALUE})")
    int[] loraAdapters;

    @Option(names = "--no-checks", description = "skips the checks")
    boolean noChecks;

    @Option(names = "--help", usageHelp = true, description = "print these options and exit")
    boolean help;

    /** The options of the table switches, in precedence order, once {@link #addOptions} made them. */
    private Map<PerfSwitch, OptionSpec> switches = Map.of();

    @Override
    public void addOptions(CommandSpec spec) {
        switches = PerfSwitch.addTo(spec);
    }

    /** The engine throughput's layer counts: --engine-layers, or 8 and 32. */
    int[] engineLayers() {
        return engineLayers.length > 0 ? engineLayers : new int[] {8, 32};
    }

    /** Layers of both --moe-perf geometries: the first of --engine-layers, or 0 for their published counts. */
    int moeLayers() {
        return engineLayers.length > 0 ? engineLayers[0] : 0;
    }

    /** Whether performance tables run: neither --no-perf nor a switch running one family of checks alone. */
    boolean perf() {
        return !noPerf && !oneFamily();
    }

    /** Whether a switch that replaces the default performance tables is on. */
    boolean replacesTables() {
        return perfTable || tables().isPresent();
    }

    /** The table switch that runs instead of the default tables: the first given in precedence order, if any. */
    Optional<PerfSwitch> tables() {
        return switches.keySet().stream().filter(this::given).findFirst();
    }

    /** Whether switch {@code s} was given (for --parallel-perf, with a geometry). */
    boolean given(PerfSwitch s) {
        OptionSpec option = switches.get(s);
        Object value = option == null ? null : option.getValue();
        return Boolean.TRUE.equals(value) || value instanceof List<?> list && !list.isEmpty();
    }

    /** The geometries of --parallel-perf, none when it is not given. */
    List<String> parallelGeometries() {
        OptionSpec parallel = switches.get(PerfSwitch.PARALLEL);
        List<String> geometries = parallel == null ? null : parallel.getValue();
        return geometries == null ? List.of() : geometries;
    }

    /**
     * Whether one family of checks runs alone: --attention-only, --moe-only, --state-space-only, --fp8-only,
     * --ops-only or --engine-only.
     */
    boolean oneFamily() {
        return attentionOnly || moeOnly || stateSpaceOnly || fp8Only || opsOnly || engineOnly;
    }

    /** Whether the checks of a family run: checks are on, and the family is the one alone or none is. */
    boolean runs(boolean familyAlone) {
        return !noChecks && (familyAlone || !oneFamily());
    }

    @Override
    public void check(CommandLine line) {
        if ((attentionOnly ? 1 : 0) + (moeOnly ? 1 : 0) + (stateSpaceOnly ? 1 : 0) + (fp8Only ? 1 : 0)
                + (opsOnly ? 1 : 0) + (engineOnly ? 1 : 0) > 1) {
            throw new ParameterException(line, "--attention-only, --moe-only, --state-space-only, --fp8-only, "
                    + "--ops-only and --engine-only each run "
                    + "one family of checks alone: give one of them");
        }
        if (!perf() && tables().isPresent()) {
            // these replace the performance tables, so --no-perf would leave them out without a word
            throw new ParameterException(line, PerfSwitch.flags() + " are performance tables: drop --no-perf (and "
                    + "--attention-only, --moe-only, --state-space-only, --fp8-only, --ops-only, --engine-only) to run them");
        }
        if (hybridLayers < 1 || hybridLayers > HybridBench.BAMBA_9B_LAYERS) {
            throw new ParameterException(line, "--hybrid-layers must be 1.." + HybridBench.BAMBA_9B_LAYERS + ", got "
                    + hybridLayers);
        }
        for (String g : parallelGeometries()) {
            try {
                ParallelBench.Geometry.of(g);
            } catch (IllegalArgumentException e) {
                throw new ParameterException(line, e.getMessage());
            }
        }
        if (tensorParallel < 2 && !parallelGeometries().isEmpty()) {
            throw new ParameterException(line, "--parallel-perf compares one GPU with --tensor-parallel N >= 2, got "
                    + tensorParallel);
        }
        if (moeGemmExpertRows < 0) {
            throw new ParameterException(line, "--moe-gemm-expert-rows must be at least 0, got " + moeGemmExpertRows);
        }
        for (int n : engineLayers) {
            if (n < 1) {
                throw new ParameterException(line, "--engine-layers counts must be at least 1, got " + n);
            }
        }
        for (int n : loraAdapters) {
            if (n < 1 || n > LORA_BATCH) {
                throw new ParameterException(line, "--lora-adapters counts must be 1.." + LORA_BATCH
                        + " (the batch), got " + n);
            }
        }
    }

    /** One {@code --profile-decode} case: decode steps of {@code batch} requests at {@code context} keys. */
    record ProfiledDecode(String model, int batch, int context) {
        @Override
        public String toString() {
            return model + ":" + batch + ":" + context;
        }

        /** Reads {@code MODEL:BATCH:CONTEXT}. */
        static final class Converter implements ITypeConverter<ProfiledDecode> {
            private static final Pattern SPEC = Pattern.compile("(8B|1B|QWEN3MOE|DSV2L|BAMBA):(\\d+):(\\d+)");

            @Override
            public ProfiledDecode convert(String spec) {
                Matcher m = SPEC.matcher(spec);
                if (!m.matches()) {
                    throw new TypeConversionException("MODEL:BATCH:CONTEXT with MODEL 8B, 1B, QWEN3MOE, DSV2L or BAMBA, got " + spec);
                }
                return new ProfiledDecode(m.group(1), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)));
            }
        }
    }
}
