package org.mstar.flink;

import java.time.Duration;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.mstar.model.WeightQuantization;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.SchedulingPolicy;
import org.mstar.resources.KVCacheDType;

/** Scheduling, KV-cache and adapter knobs of the engine {@link LlamaEngineFactory} builds on each subtask. */
@PublicEvolving
public final class LlamaEngineOptions {
    private LlamaEngineOptions() {}

    public static final ConfigOption<Integer> MAX_BATCH_ROWS = ConfigOptions.key("mstar.engine.max-batch-rows")
            .intType()
            .defaultValue(16)
            .withDescription("Most requests in one engine step. Unset on a GPU: 256 (the largest decode graph); the"
                    + " default is the CPU's.");

    public static final ConfigOption<Integer> TOKEN_BUDGET = ConfigOptions.key("mstar.engine.token-budget")
            .intType()
            .defaultValue(256)
            .withDescription("Most tokens in one engine step; longer prompts are prefilled in chunks over several"
                    + " steps. Unset on a GPU: 8192; the default is the CPU's.");

    public static final ConfigOption<Double> GPU_MEMORY_FRACTION = ConfigOptions.key("mstar.engine.gpu-memory-fraction")
            .doubleType()
            .defaultValue(0.9)
            .withDescription("On a GPU, the share of the device's memory this process may fill, weights included:"
                    + " the KV pool takes what is left of it after the weights, whatever else is on the device and"
                    + " a measured activation reserve (a prefill at the token budget and the decode graphs at the row"
                    + " cap), unless 'mstar.kv.pages' is set. Like vLLM's gpu_memory_utilization.");

    public static final ConfigOption<Integer> ENGINES_PER_DEVICE = ConfigOptions.key("mstar.engine.engines-per-device")
            .intType()
            .defaultValue(1)
            .withDescription("Engines of this job that share one GPU; each sizes its KV pool to its part of the room"
                    + " left. A disaggregated job whose prefill and decode run on the same device sets it to 2.");

    public static final ConfigOption<Integer> MAX_SEQ_LEN = ConfigOptions.key("mstar.kv.max-seq-len")
            .intType()
            .defaultValue(4096)
            .withDescription("Longest sequence (prompt + generated tokens) a request may reach; capped at the"
                    + " model's context. A longer prompt is rejected with a 400.");

    public static final ConfigOption<Integer> PAGES = ConfigOptions.key("mstar.kv.pages")
            .intType()
            .defaultValue(512)
            .withDescription("KV pages on the device (page 0 is reserved), each of 'mstar.kv.page-size' tokens."
                    + " Unset on a GPU: sized from the device's memory ('mstar.engine.gpu-memory-fraction'); the"
                    + " default is the CPU's.");

    public static final ConfigOption<Integer> PAGE_SIZE = ConfigOptions.key("mstar.kv.page-size")
            .intType()
            .defaultValue(16)
            .withDescription("Tokens per KV page.");

    public static final ConfigOption<Integer> CPU_OFFLOAD_PAGES = ConfigOptions.key("mstar.kv.cpu-offload-pages")
            .intType()
            .defaultValue(0)
            .withDescription("Host pages that hold the KV of preempted requests; 0 frees it instead, and the request"
                    + " recomputes it when it runs again.");

    public static final ConfigOption<Boolean> PREFIX_CACHE = ConfigOptions.key("mstar.kv.prefix-cache")
            .booleanType()
            .defaultValue(true)
            .withDescription("Whether requests share the KV of equal prompt prefixes (whole pages).");

    public static final ConfigOption<String> KV_CACHE_DTYPE = ConfigOptions.key("mstar.kv.cache-dtype")
            .stringType()
            .defaultValue(KVCacheDType.AUTO.optionValue())
            .withDescription("What KV pages store keys and values in: 'auto' (the model's dtype: bf16 on a GPU) or"
                    + " 'fp8_e4m3' (E4M3 codes, per-tensor scale 1: half the bytes a token, so a pool of the same"
                    + " memory holds twice the tokens). FP8 covers the Llama family's paged attention, not latent"
                    + " (MLA) pages, Mamba2/Bamba, Whisper or batch-invariant numerics; docs/guides/models.md, FP8 KV"
                    + " cache.");

    public static final ConfigOption<Integer> WINDOWED_LAYER_PAGES = ConfigOptions.key("mstar.kv.windowed-layer-pages")
            .intType()
            .defaultValue(0)
            .withDescription("Pages of a separate KV cache for the sliding-window layers of a model that also has"
                    + " global ones (Gemma 3), where each request keeps only its window instead of its whole context;"
                    + " for a model whose every layer is windowed (Mistral, Phi-3) any value >= 2 makes the one cache"
                    + " keep only each request's window. Needs mstar.kv.prefix-cache=false and a colocated engine."
                    + " 0 keeps every layer's KV for the whole request.");

    public static final ConfigOption<Boolean> DECODE_GRAPHS = ConfigOptions.key("mstar.engine.decode-graphs")
            .booleanType()
            .defaultValue(true)
            .withDescription("On a GPU, whether decode-only steps are padded to a batch bucket (1, 2, 4, ... up to"
                    + " max-batch-rows, at most 256) and replayed as one CUDA graph per bucket instead of launching"
                    + " every kernel from the host. Prefill and mixed steps always run eagerly; the CPU ignores it.");

    public static final ConfigOption<Boolean> PREPLAN = ConfigOptions.key("mstar.engine.preplan")
            .booleanType()
            .defaultValue(true)
            .withDescription("With decode graphs, whether each decode step is admitted and planned while the GPU runs"
                    + " the one before, so the next step's planning leaves the GPU idle for less; a step that turns out"
                    + " different (a request stopped, another joined) drops it and plans as usual.");

    public static final ConfigOption<Boolean> LAUNCH_AHEAD = ConfigOptions.key("mstar.engine.launch-ahead")
            .booleanType()
            .defaultValue(true)
            .withDescription("With pre-planning, whether a pre-planned decode step is launched before the host has"
                    + " the tokens of the step before it (the GPU copies them into its input), so the GPU goes from one"
                    + " decode step to the next without waiting for the host to accept the tokens; a request those"
                    + " tokens stop has its row in the step launched ahead computed and dropped.");

    public static final ConfigOption<SchedulingPolicy> SCHEDULING_POLICY = ConfigOptions.key("mstar.engine.scheduling-policy")
            .enumType(SchedulingPolicy.class)
            .defaultValue(SchedulingPolicy.PRIORITY)
            .withDescription("PRIORITY: a request's priority (higher first) decides admission, rows and who is"
                    + " preempted, raised one level per priority-aging waited so nothing starves; FCFS: arrival order.");

    public static final ConfigOption<Duration> PRIORITY_AGING = ConfigOptions.key("mstar.engine.priority-aging")
            .durationType()
            .defaultValue(Duration.ofSeconds(1))
            .withDescription("Under PRIORITY, how long a request waits to rise one priority level; 0 is strict"
                    + " priority without aging.");

    public static final ConfigOption<Duration> MAX_PREFILL_STALL = ConfigOptions.key("mstar.engine.max-prefill-stall")
            .durationType()
            .defaultValue(Duration.ZERO)
            .withDescription("The longest a step carrying decodes may take because of the prefill chunks in it, from"
                    + " measured step times: bounds how long a long prompt holds back every running request's next"
                    + " token. 0 bounds prefill chunks by the token budget only.");

    public static final ConfigOption<String> ADAPTERS_DIR = ConfigOptions.key("mstar.engine.adapters-dir")
            .stringType()
            .noDefaultValue()
            .withDescription("Folder of PEFT LoRA adapters, one subfolder per adapter (adapter_config.json,"
                    + " adapter_model.safetensors), at the same path on every TaskManager: a request naming an adapter"
                    + " ('adapter') generates with it. Read when the engine starts; an adapter the engine cannot apply"
                    + " fails the start, naming it. Unset: requests naming an adapter get a 400"
                    + " (docs/guides/lora.md).");

    public static final ConfigOption<Integer> ADAPTER_SLOTS = ConfigOptions.key("mstar.engine.adapter-slots")
            .intType()
            .defaultValue(AdapterOptions.DEFAULT_SLOTS)
            .withDescription("Adapters kept on the device at once, each in a slot sized for the largest rank of the"
                    + " folder; an adapter no running request uses gives its slot to another, least recently used"
                    + " first, and a request whose adapter finds no slot waits.");

    public static final ConfigOption<Boolean> BATCH_INVARIANT = ConfigOptions.key("mstar.engine.batch-invariant")
            .booleanType()
            .defaultValue(false)
            .withDescription("On a GPU, numerics that give every request the same tokens whatever it is batched"
                    + " with (split-free matmuls, one attention kernel for prefill and decode), so a request"
                    + " recomputed after a failure continues exactly as the lost run would have. Costs decode"
                    + " speed (docs/architecture/batch-invariance.md); bf16 at head dims 64, 80, 96, 128, 256. The CPU always"
                    + " has them.");

    public static final ConfigOption<String> QUANTIZATION = ConfigOptions.key("mstar.engine.quantization")
            .stringType()
            .defaultValue(WeightQuantization.NONE.flag())
            .withDescription("How the projections' weights stay on the device: 'none' (the engine's dtype; an FP8"
                    + " checkpoint is dequantised at load) or 'fp8' (E4M3 codes with fp32 scales: an FP8 checkpoint"
                    + " keeps its codes and scales, any other is quantised at load with one scale an output row;"
                    + " about half the weight bytes of bf16) or 'fp8-w8a8' (those weights, and each projection's input"
                    + " quantised per token to FP8, so that a GPU multiplies FP8 x FP8; docs/guides/models.md, FP8"
                    + " checkpoints).");

    public static final ConfigOption<Integer> TENSOR_PARALLEL = ConfigOptions.key("mstar.engine.tensor-parallel")
            .intType()
            .defaultValue(1)
            .withDescription("Devices one engine splits the model over, all owned by its subtask: its device and the"
                    + " N-1 after it (cuda:K gives cuda:K..K+N-1; cpu gives N CPU devices). Attention heads, the dense"
                    + " MLPs' columns and the LM head's vocabulary are split (tensor parallelism), routed experts"
                    + " placed N to a device apart (expert parallelism); the ranks sum through an all-reduce."
                    + " Above 1: no decode graphs, no host offload of KV pages, no adapters, no FP8 weights, colocated"
                    + " only, and the KV pages are taken as set (mstar.kv.pages), not sized from the device"
                    + " (docs/guides/parallelism.md).");
}
