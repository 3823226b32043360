package org.mstar.sql;

import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.resources.SamplingReqConfig;

/**
 * The {@code WITH} options of {@code CREATE MODEL ... WITH ('provider' = 'mstar', ...)}. Every key not listed here
 * is refused by name; values are checked when the model is created (with the catalog listener) and whenever a query
 * uses it.
 */
@PublicEvolving
public final class MstarModelOptions {
    private MstarModelOptions() {}

    /** What a row whose input the model cannot take (a 400) or whose generation failed (a 500) becomes. */
    public enum OnError {
        /** A row with {@code finish_reason} 'error', null text and the message in {@code error}. */
        ROW,
        /** The prediction fails, and with it the job (it restarts as its restart strategy says). */
        FAIL
    }

    // ------------------------------------------------------------------------
    //  the model
    // ------------------------------------------------------------------------

    public static final ConfigOption<String> MODEL_DIR = ConfigOptions.key("model.dir")
            .stringType()
            .noDefaultValue()
            .withDescription("Folder of the model in Hugging Face layout (config.json, safetensors, tokenizer.json),"
                    + " readable at the same path on every TaskManager. Set this or 'model.random'.");

    public static final ConfigOption<String> MODEL_RANDOM = ConfigOptions.key("model.random")
            .stringType()
            .noDefaultValue()
            .withDescription("Random weights instead of a checkpoint: 'tiny' for the bundled tiny Llama, or the path of"
                    + " a config.json of any Llama-family geometry. Written once per TaskManager under"
                    + " ~/.cache/mstar; the text is noise, everything else is the real path. Set this or 'model.dir'.");

    public static final ConfigOption<String> DEVICE = ConfigOptions.key("device")
            .stringType()
            .defaultValue(GenerateOptions.DEVICE.defaultValue())
            .withDescription("As 'mstar.engine.device': cpu, cuda:N, a list such as cuda:0,cuda:1 (subtask i takes"
                    + " entry i modulo its length), or auto (a GPU from Flink's external resource 'gpu-resource',"
                    + " else the CPU).");

    public static final ConfigOption<String> GPU_RESOURCE = ConfigOptions.key("gpu-resource")
            .stringType()
            .defaultValue(GenerateOptions.GPU_RESOURCE.defaultValue())
            .withDescription("Name of Flink's external resource that lists a TaskManager's GPUs, for device = auto.");

    // ------------------------------------------------------------------------
    //  generation defaults of every row
    // ------------------------------------------------------------------------

    public static final ConfigOption<Integer> MAX_TOKENS = ConfigOptions.key("max-tokens")
            .intType()
            .defaultValue(GenerateOptions.DEFAULT_MAX_TOKENS.defaultValue())
            .withDescription("Most tokens generated for a row.");

    public static final ConfigOption<Double> TEMPERATURE = ConfigOptions.key("temperature")
            .doubleType()
            .defaultValue(SamplingReqConfig.DEFAULTS.temperature())
            .withDescription("Sampling temperature; 0 is greedy.");

    public static final ConfigOption<Integer> TOP_K = ConfigOptions.key("top-k")
            .intType()
            .defaultValue(SamplingReqConfig.DEFAULTS.topK())
            .withDescription("Sample among the k most likely tokens; 0 is off.");

    public static final ConfigOption<Double> TOP_P = ConfigOptions.key("top-p")
            .doubleType()
            .defaultValue(SamplingReqConfig.DEFAULTS.topP())
            .withDescription("Nucleus sampling mass in (0, 1]; 1 is off.");

    public static final ConfigOption<Double> MIN_P = ConfigOptions.key("min-p")
            .doubleType()
            .defaultValue(SamplingReqConfig.DEFAULTS.minP())
            .withDescription("Drop tokens less likely than min-p times the most likely one; 0 is off.");

    public static final ConfigOption<Double> REPETITION_PENALTY = ConfigOptions.key("repetition-penalty")
            .doubleType()
            .defaultValue(SamplingReqConfig.DEFAULTS.repetitionPenalty())
            .withDescription("Penalty of tokens already in the sequence; 1 is off.");

    public static final ConfigOption<Long> SEED = ConfigOptions.key("seed")
            .longType()
            .defaultValue(0L)
            .withDescription("Mixed with each row's prompt into the row's sampling seed: a row's text depends only on"
                    + " its prompt, the options and the model, so a row re-run after a failure gets the same text.");

    public static final ConfigOption<Boolean> CHAT_TEMPLATE = ConfigOptions.key("chat-template")
            .booleanType()
            .defaultValue(false)
            .withDescription("Whether a 'prompt' is sent as one user turn through the model's chat template rather than"
                    + " as raw text. A 'messages' input always goes through the template.");

    public static final ConfigOption<String> JSON_SCHEMA = ConfigOptions.key("json-schema")
            .stringType()
            .noDefaultValue()
            .withDescription("Structured output: every row's text is compact JSON valid under this JSON schema.");

    public static final ConfigOption<String> REGEX = ConfigOptions.key("regex")
            .stringType()
            .noDefaultValue()
            .withDescription("Structured output: every row's text matches this regular expression as a whole.");

    public static final ConfigOption<Boolean> IGNORE_EOS = ConfigOptions.key("ignore-eos")
            .booleanType()
            .defaultValue(false)
            .withDescription("Whether every row generates 'max-tokens' tokens, going on past the end of sequence (for"
                    + " benchmarks of fixed output lengths, as vLLM's ignore_eos).");

    public static final ConfigOption<OnError> ON_ERROR = ConfigOptions.key("on-error")
            .enumType(OnError.class)
            .defaultValue(OnError.ROW)
            .withDescription("ROW: a row the model cannot take (no prompt, too long, a conversation without a chat"
                    + " template) or whose generation failed gets an output row with finish_reason 'error' and the"
                    + " reason in the 'error' column, and the job goes on. FAIL: the job fails.");

    // ------------------------------------------------------------------------
    //  the engine: each is the library option named in its description
    // ------------------------------------------------------------------------

    public static final ConfigOption<String> ENGINE_FACTORY = ConfigOptions.key("engine.factory")
            .stringType()
            .defaultValue(GenerateOptions.ENGINE_FACTORY.defaultValue())
            .withDescription("As mstar.engine.factory: class name of the EngineFactory that builds each subtask's"
                    + " engine, with a public constructor taking a ReadableConfig (the engine options below under"
                    + " their library keys, and mstar.model.dir).");

    // No defaults for rows, budget and pages: unset, a GPU sizes them from its free memory as serve does
    // (the CPU takes the library's defaults).
    public static final ConfigOption<Integer> MAX_BATCH_ROWS = ConfigOptions.key("engine.max-batch-rows")
            .intType()
            .noDefaultValue()
            .withDescription("As mstar.engine.max-batch-rows: most rows in one engine step. Default: "
                    + LlamaEngineOptions.MAX_BATCH_ROWS.defaultValue() + " on the CPU, sized from memory on a GPU.");

    public static final ConfigOption<Integer> TOKEN_BUDGET = ConfigOptions.key("engine.token-budget")
            .intType()
            .noDefaultValue()
            .withDescription("As mstar.engine.token-budget: most tokens in one engine step. Default: "
                    + LlamaEngineOptions.TOKEN_BUDGET.defaultValue() + " on the CPU, sized on a GPU.");

    public static final ConfigOption<Double> GPU_MEMORY_FRACTION = ConfigOptions.key("engine.gpu-memory-fraction")
            .doubleType()
            .defaultValue(LlamaEngineOptions.GPU_MEMORY_FRACTION.defaultValue())
            .withDescription("As mstar.engine.gpu-memory-fraction: share of the GPU's memory the sized engine may"
                    + " use, weights included.");

    public static final ConfigOption<Boolean> DECODE_GRAPHS = ConfigOptions.key("engine.decode-graphs")
            .booleanType()
            .defaultValue(LlamaEngineOptions.DECODE_GRAPHS.defaultValue())
            .withDescription("As mstar.engine.decode-graphs: CUDA graphs for decode steps on a GPU.");

    public static final ConfigOption<Boolean> BATCH_INVARIANT = ConfigOptions.key("engine.batch-invariant")
            .booleanType()
            .defaultValue(LlamaEngineOptions.BATCH_INVARIANT.defaultValue())
            .withDescription("As mstar.engine.batch-invariant: on a GPU, a row re-run after a failure gets the same"
                    + " text whatever it is batched with. The CPU always has it.");

    public static final ConfigOption<String> ADAPTERS_DIR = ConfigOptions.key("engine.adapters-dir")
            .stringType()
            .noDefaultValue()
            .withDescription("As mstar.engine.adapters-dir: folder of PEFT LoRA adapters (a subfolder per adapter) at"
                    + " the same path on every TaskManager, which the input column 'adapter' names. Unset: none.");

    public static final ConfigOption<Integer> ADAPTER_SLOTS = ConfigOptions.key("engine.adapter-slots")
            .intType()
            .defaultValue(LlamaEngineOptions.ADAPTER_SLOTS.defaultValue())
            .withDescription("As mstar.engine.adapter-slots: adapters kept on the device at once.");

    public static final ConfigOption<Integer> MAX_SEQ_LEN = ConfigOptions.key("kv.max-seq-len")
            .intType()
            .defaultValue(LlamaEngineOptions.MAX_SEQ_LEN.defaultValue())
            .withDescription("As mstar.kv.max-seq-len: longest prompt + generated tokens of a row.");

    public static final ConfigOption<Integer> PAGES = ConfigOptions.key("kv.pages")
            .intType()
            .noDefaultValue()
            .withDescription("As mstar.kv.pages: KV pages on the device. Default: "
                    + LlamaEngineOptions.PAGES.defaultValue() + " on the CPU, what the GPU's memory holds on a GPU.");

    public static final ConfigOption<Integer> PAGE_SIZE = ConfigOptions.key("kv.page-size")
            .intType()
            .defaultValue(LlamaEngineOptions.PAGE_SIZE.defaultValue())
            .withDescription("As mstar.kv.page-size: tokens per KV page.");

    public static final ConfigOption<Boolean> PREFIX_CACHE = ConfigOptions.key("kv.prefix-cache")
            .booleanType()
            .defaultValue(LlamaEngineOptions.PREFIX_CACHE.defaultValue())
            .withDescription("As mstar.kv.prefix-cache: rows share the KV of equal prompt prefixes.");

    public static final ConfigOption<Integer> CPU_OFFLOAD_PAGES = ConfigOptions.key("kv.cpu-offload-pages")
            .intType()
            .defaultValue(LlamaEngineOptions.CPU_OFFLOAD_PAGES.defaultValue())
            .withDescription("As mstar.kv.cpu-offload-pages: host pages for the KV of preempted rows.");
}
