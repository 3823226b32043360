package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * The GPU harness's switches that run a family of performance tables instead of the default ones, one constant a
 * switch: its name, what it runs (the help says "instead of the tables: " and this) and the option it follows in
 * {@code --help}. Declared in precedence order: of several given, the first runs.
 */
enum PerfSwitch {
    INVARIANCE("--invariance-perf", "--decode-models",
            "GEMMs, decode attention and engine throughput, batch invariance off and on"),
    PREFILL("--prefill-perf", "--engine-layers",
            "prefill attention and engine prefill at 512, 2048 and 16384-token prompts"),
    /** Takes the geometries to run. */
    PARALLEL("--parallel-perf", "--fp8-gemm-perf",
            "geometries G (8B, 70B, moe) on 1 GPU and on --tensor-parallel GPUs"),
    MOE("--moe-perf", "--hybrid-layers", "MoE experts alone and Qwen3-30B-A3B / DeepSeek-V2-Lite engine rows"),
    FP8("--fp8-perf", "--skinny-perf",
            "FP8-KV attention, W8A8 GEMMs, 8B engine decode and prefill, fp8 and w8a8 vs bf16"),
    FP8_GEMM("--fp8-gemm-perf", "--fp8-perf",
            "the W8A8 GEMMs at 8B prefill shapes against bf16, and the FP8 dense rate"),
    SKINNY("--skinny-perf", "--invariance-perf",
            "decode projections and few-request decode steps, on cuBLAS and on the skinny-matmul kernel"),
    LORA("--lora-perf", "--no-qkv-rope-in-matmul", "engine decode at batch 64 without and with rank-16 LoRA adapters"),
    LATENT("--latent-perf", "--parallel-layers",
            "MLA decode attention at 4k-16k keys, batch 1-64, against copy bandwidth; latent pool bytes"),
    HYBRID("--hybrid-perf", "--latent-perf",
            "Bamba-9B engine decode (batch 1, 64) and prefill (2048 tokens) against their bounds"),
    DECODE("--decode-perf", "--prefill-perf",
            "decode attention, projections and engine decode steps against the weights+KV bound");

    final String flag;
    private final String after;
    private final String runs;

    PerfSwitch(String flag, String after, String runs) {
        this.flag = flag;
        this.after = after;
        this.runs = runs;
    }

    /** Every switch's name, in precedence order, as a refusal lists them: "--a, --b and --c". */
    static String flags() {
        PerfSwitch[] all = values();
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < all.length; i++) {
            sb.append(i == 0 ? "" : i == all.length - 1 ? " and " : ", ").append(all[i].flag);
        }
        return sb.toString();
    }

    /**
     * Adds an option to {@code spec} for each switch, each listed right after the option it follows; returns them.
     * {@link #PARALLEL} takes a comma-separated list of geometries, the others are plain switches.
     */
    static Map<PerfSwitch, OptionSpec> addTo(CommandSpec spec) {
        Map<PerfSwitch, OptionSpec> options = new EnumMap<>(PerfSwitch.class);
        for (PerfSwitch s : values()) {
            OptionSpec.Builder b = OptionSpec.builder(s.flag).description("instead of the tables: " + s.runs);
            options.put(s, (s == PARALLEL ? b.paramLabel("G").splitRegex(",").type(List.class)
                    .auxiliaryTypes(String.class) : b.type(boolean.class)).build());
        }
        // picocli lists options in the order they were added: add them all again, each switch after its option
        List<OptionSpec> declared = new ArrayList<>(spec.options());
        declared.forEach(spec::remove);
        for (OptionSpec o : declared) {
            addFollowedBySwitches(spec, o, options);
        }
        for (PerfSwitch s : values()) {
            if (spec.findOption(s.flag) == null) {
                throw new IllegalStateException(s.flag + " follows " + s.after + ", which is not an option");
            }
        }
        return options;
    }

    private static void addFollowedBySwitches(CommandSpec spec, OptionSpec option,
                                              Map<PerfSwitch, OptionSpec> switches) {
        spec.addOption(option);
        for (Map.Entry<PerfSwitch, OptionSpec> e : switches.entrySet()) {
            if (e.getKey().after.equals(option.longestName())) {
                addFollowedBySwitches(spec, e.getValue(), switches);
            }
        }
    }
}
