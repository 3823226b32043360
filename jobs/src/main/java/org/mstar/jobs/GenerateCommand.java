package org.mstar.jobs;

import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import org.mstar.device.Device;
import org.mstar.device.DeviceGroup;
import org.mstar.device.KernelOptions;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineStats;
import org.mstar.engine.FinishReason;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.HybridEngineLoader;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.model.HybridConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.chat.ChatMessage;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LoadProgressLines;
import org.mstar.resources.KVCacheDType;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code mstar generate}: run the engine directly (no Flink, no Kafka) on one prompt and stream the
 * tokens to the terminal, with the base model or one LoRA adapter ({@code --adapter}).
 */
@Command(name = "generate", mixinStandardHelpOptions = true,
        description = "Generate from one prompt with the engine alone, streaming tokens to the terminal.")
final class GenerateCommand implements Callable<Integer> {
    @Option(names = "--model", paramLabel = "DIR", description = "Hugging Face model folder (config.json, *.safetensors, tokenizer.json).")
    Path model;

    @Option(names = "--random", paramLabel = "CONFIG.json", arity = "0..1", fallbackValue = "",
            description = "Random weights of this config.json's geometry, a Llama-family, Mamba2 or Bamba one (no"
                    + " value: a bundled tiny Llama).")
    String random;

    @Option(names = "--prompt", description = "The prompt text.")
    String prompt;

    @Option(names = "--prompt-ids", paramLabel = "ID,ID,...", split = ",",
            description = "Instead of --prompt: the prompt as token ids of the model's vocabulary.")
    int[] promptIds;

    @Option(names = "--max-tokens", defaultValue = "64", description = "Most tokens to generate (default: ${DEFAULT-VALUE}).")
    int maxTokens;

    @Option(names = "--temperature", defaultValue = "0.6", description = "0 is greedy (default: ${DEFAULT-VALUE}).")
    double temperature;

    @Option(names = "--top-k", defaultValue = "0", description = "0 disables (default: ${DEFAULT-VALUE}).")
    int topK;

    @Option(names = "--top-p", defaultValue = "1.0", description = "1 disables (default: ${DEFAULT-VALUE}).")
    double topP;

    @Option(names = "--seed", defaultValue = "0", description = "Sampler seed (default: ${DEFAULT-VALUE}).")
    long seed;

    @Mixin
    ConstraintFlags constraint;

    @Option(names = "--device", defaultValue = "cpu", description = "cpu, cuda:N, or with --tensor-parallel a list"
            + " cuda:0,cuda:2 (default: ${DEFAULT-VALUE}).")
    String device;

    @Option(names = "--tensor-parallel", defaultValue = "1", paramLabel = "N",
            description = "Split the model over N devices: cpu gives N CPU devices, cuda:K gives cuda:K..K+N-1, a list"
                    + " names them (tensor parallelism; expert parallelism for routed experts) (default: ${DEFAULT-VALUE}).")
    int tensorParallel;

    @Option(names = "--max-seq-len", defaultValue = "2048", description = "Longest prompt + output (default: ${DEFAULT-VALUE}).")
    int maxSeqLen;

    @Option(names = "--windowed-layer-pages", defaultValue = "0", paramLabel = "N",
            description = "Pages of a separate KV cache for the sliding-window layers of a model with global ones too "
                    + "(Gemma 3): each request keeps only its window there; for a model whose every layer is windowed "
                    + "(Mistral, Phi-3) any N >= 2 makes the one cache keep only the window (default: ${DEFAULT-VALUE}, "
                    + "every token kept).")
    int windowedLayerPages;

    @Option(names = "--quantization", defaultValue = "none", paramLabel = "none|fp8|fp8-w8a8",
            description = "fp8: keep the projections' weights on the device as FP8 codes with scales (an FP8 checkpoint"
                    + " as stored, any other quantised at load, one scale an output row); fp8-w8a8: those weights, and"
                    + " each projection's input quantised per token to FP8 too (FP8 x FP8 GEMMs on a GPU)"
                    + " (default: ${DEFAULT-VALUE}).")
    String quantization;

    @Option(names = "--kv-cache-dtype", defaultValue = "auto", paramLabel = "auto|fp8_e4m3",
            description = "What the KV pages store: the model's dtype, or FP8 E4M3 codes (half the bytes a token)"
                    + " (default: ${DEFAULT-VALUE}).")
    String kvCacheDType;

    @Option(names = "--chat", description = "Send the prompt as a user message, rendered by the model folder's chat template.")
    boolean chat;

    @Option(names = "--system", paramLabel = "TEXT", description = "With --chat: a system message before the prompt.")
    String system;

    @Option(names = "--adapters", paramLabel = "DIR",
            description = "Folder of PEFT LoRA adapters (a subfolder per adapter) that --adapter names.")
    Path adaptersDir;

    @Option(names = "--random-adapters", paramLabel = "N",
            description = "With --random (or no --model): N random LoRA adapters (random-1 ...) for it, as serve"
                    + " --random-adapters writes them, instead of --adapters.")
    Integer randomAdapters;

    @Option(names = "--adapter", paramLabel = "NAME",
            description = "Generate with this LoRA adapter of --adapters or --random-adapters; unset: the base model.")
    String adapter;

    @Override
    public Integer call() {
        PrintStream out = System.out;
        if (randomAdapters != null && (model != null || adaptersDir != null)) {
            throw new IllegalArgumentException("--random-adapters goes with --random (or no --model), and instead of"
                    + " --adapters");
        }
        if ((prompt == null) == (promptIds == null) || (promptIds != null && chat)) {
            throw new IllegalArgumentException("give --prompt TEXT or --prompt-ids ID,ID,... (not with --chat)");
        }
        if (model == null && random == null) {
            random = "";
            out.println("[no --model given: serving a bundled random-weight tiny Llama; its text is gibberish]");
        }
        Path dir = ModelSource.resolve(model, random, new PrintWriter(System.err, true));
        Path adapters = randomAdapters != null ? ModelSource.randomAdapters(dir, randomAdapters) : adaptersDir;
        int pageSize = 16;
        int pages = (maxSeqLen + pageSize - 1) / pageSize + 2;
        // decode steps replay as CUDA graphs on a GPU; the CPU runs them eagerly
        int degree = degree();
        // decode steps replay as CUDA graphs on one GPU; the CPU and a tensor-parallel group run them eagerly
        EngineOptions options = new EngineOptions(1, 512, KvCacheOptions.builder().maxSeqLen(maxSeqLen)
                .maxNumPages(pages).pageSize(pageSize).prefixCache(false).windowedLayerPages(windowedLayerPages)
                .cacheDType(KVCacheDType.parse(kvCacheDType)).build(),
                degree == 1 && !device.trim().equalsIgnoreCase("cpu"));
        if (adapters != null) {
            // one request: one slot holds its adapter
            options = options.withAdapters(new AdapterOptions(adapters, 1));
        }
        SamplingReqConfig sampling = new SamplingReqConfig(temperature, topK, topP, false, 1.0, 0.0, 0, 0, false, 1,
                true, seed);
        try (DeviceGroup group = DeviceGroup.open(device, degree, KernelOptions.defaults());
             GenerationEngine engine = load(dir, group, options)) {
            try {
                submit(engine, sampling);
            } catch (RequestValidationException e) {
                System.err.println("error 400: " + e.getMessage());
                return 1;
            }
            out.print(chat || prompt == null ? "" : prompt);
            out.flush();
            FinishedRequest done = StreamedRun.toEnd(engine, out);
            if (done == null) {
                return 1;
            }
            report(done, engine.stats(), maxTokens, maxSeqLen);
            return 0;
        }
    }

    /** The split asked for: --tensor-parallel, or the length of a --device list. */
    private int degree() {
        int listed = device.split(",").length;
        if (listed > 1 && tensorParallel == 1) {
            return listed;
        }
        return tensorParallel;
    }

    /**
     * The engine of the folder's architecture: Mamba2 and Bamba on the hybrid engine (one device), the others on the
     * Llama one.
     */
    private GenerationEngine load(Path dir, DeviceGroup group, EngineOptions options) {
        WeightQuantization weights = WeightQuantization.parse(quantization);
        if (!HybridConfig.isHybrid(dir)) {
            return LlamaEngineLoader.load(dir, group, options, weights, new LoadProgressLines(System.err::println));
        }
        if (group.size() > 1) {
            throw new IllegalArgumentException("--tensor-parallel " + group.size() + ": a Mamba2 or Bamba model runs on"
                    + " one device");
        }
        Device dev = group.device(0);
        if (weights != WeightQuantization.NONE) {
            throw new IllegalArgumentException("--quantization " + quantization + ": a Mamba2 or Bamba model is served"
                    + " with its weights as stored");
        }
        return HybridEngineLoader.load(dir, dev, options);
    }

    /**
     * The prompt as text, as token ids, or with --chat as a conversation the engine renders with the model's chat
     * template.
     */
    private void submit(GenerationEngine engine, SamplingReqConfig sampling) {
        if (promptIds != null) {
            engine.submit(GenerationRequest.builder("cli").promptTokenIds(promptIds).sampling(sampling)
                    .maxTokens(maxTokens).constraint(constraint.constraint()).adapter(adapter).build());
            return;
        }
        if (!chat) {
            engine.submit(GenerationRequest.builder("cli").promptText(prompt).sampling(sampling).maxTokens(maxTokens)
                    .constraint(constraint.constraint()).adapter(adapter).build());
            return;
        }
        List<ChatMessage> messages = new ArrayList<>();
        if (system != null) {
            messages.add(new ChatMessage("system", system));
        }
        messages.add(ChatMessage.user(prompt));
        engine.submit(GenerationRequest.builder("cli").messages(messages).sampling(sampling).maxTokens(maxTokens)
                .constraint(constraint.constraint()).adapter(adapter).build());
    }

    /** The result line; it says when the context (prompt + output up to --max-seq-len) ended the output early. */
    static void report(FinishedRequest done, EngineStats stats, int maxTokens, int maxSeqLen) {
        var t = done.timings();
        double seconds = t.totalNanos() / 1e9;
        int generated = done.tokenIds().length;
        String capped = done.finish() == FinishReason.LENGTH && generated < maxTokens
                && done.promptTokens() + generated >= maxSeqLen
                ? " (the context is full: --max-tokens " + maxTokens + " was capped by --max-seq-len " + maxSeqLen + ")"
                : "";
        System.err.printf("[%d prompt tokens, %d generated, finish=%s%s, time to first token %.1f ms, "
                        + "inter-token %.1f ms, %.1f tokens/s]%n",
                done.promptTokens(), generated, done.finish().wireName(), capped,
                t.timeToFirstTokenNanos() / 1e6, t.meanInterTokenNanos() / 1e6,
                seconds > 0 ? generated / seconds : 0.0);
    }
}
