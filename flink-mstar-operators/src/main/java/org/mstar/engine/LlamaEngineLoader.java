package org.mstar.engine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceGroup;
import org.mstar.device.Devices;
import org.mstar.model.GenerationConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.llama.LoadProgress;
import org.mstar.model.llama.ShardLayout;
import org.mstar.model.llama.ShardedWeights;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Builds a {@link LlamaEngine} from a Hugging Face model folder (config.json, safetensors weights,
 * tokenizer.json, generation_config.json, and the chat template when the folder has one). Precision follows the
 * device: fp32 weights, activations and KV on the CPU reference; bf16 storage with fp32 accumulation on a GPU.
 */
public final class LlamaEngineLoader {
    private LlamaEngineLoader() {}

    /** Load the weights and build an engine that owns them (closing the engine frees them). */
    public static LlamaEngine load(Path modelDir, Device device, EngineOptions options) {
        return load(modelDir, device, options, LoadProgress.NONE);
    }

    /** As {@link #load(Path, Device, EngineOptions)}, telling {@code progress} how much of the weights is loaded. */
    public static LlamaEngine load(Path modelDir, Device device, EngineOptions options, LoadProgress progress) {
        return load(modelDir, device, options, WeightQuantization.NONE, progress);
    }

    /** As {@link #load(Path, Device, EngineOptions, LoadProgress)}, the weights kept as {@code quantization} says. */
    public static LlamaEngine load(Path modelDir, Device device, EngineOptions options, WeightQuantization quantization,
                                   LoadProgress progress) {
        LlamaWeights weights = loadWeights(modelDir, device, quantization, progress);
        try {
            LlamaEngine engine = load(modelDir, weights, options);
            engine.own(weights);
            return engine;
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
    }

    /** The folder's weights on {@code device}, in the precision the device computes in. */
    public static LlamaWeights loadWeights(Path modelDir, Device device) {
        return loadWeights(modelDir, device, LoadProgress.NONE);
    }

    /** As {@link #loadWeights(Path, Device)}, telling {@code progress} how much is loaded. */
    public static LlamaWeights loadWeights(Path modelDir, Device device, LoadProgress progress) {
        return loadWeights(modelDir, device, WeightQuantization.NONE, progress);
    }

    /**
     * As {@link #loadWeights(Path, Device, LoadProgress)}, the projections kept as {@code quantization} says (FP8
     * codes and scales on the device for {@link WeightQuantization#FP8}).
     */
    public static LlamaWeights loadWeights(Path modelDir, Device device, WeightQuantization quantization,
                                           LoadProgress progress) {
        try {
            return LlamaWeights.load(modelDir, device, storageType(device), quantization, progress);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the weights in " + modelDir, e);
        }
    }

    /**
     * Build an engine over weights loaded once and shared: the engine owns its KV cache and tokenizer,
     * not the weights, which outlive it.
     */
    public static LlamaEngine load(Path modelDir, LlamaWeights weights, EngineOptions options) {
        return load(modelDir, weights, weights.device(), options);
    }

    /** As {@link #load(Path, LlamaWeights, EngineOptions)}, computing through {@code device}, a view of the weights'. */
    public static LlamaEngine load(Path modelDir, LlamaWeights weights, Device device, EngineOptions options) {
        DType storage = storageType(device);
        LlamaModel model = new LlamaModel(weights, device, storage, modelDir.toAbsolutePath().normalize().toString());
        return build(modelDir, model, options, storage);
    }

    private static LlamaEngine build(Path modelDir, LlamaModel model, EngineOptions options, DType storage) {
        try {
            Path tokenizerFile = modelDir.resolve(TextTokenizer.FILE_NAME);
            TextTokenizer tokenizer = Files.exists(tokenizerFile) ? TextTokenizer.load(modelDir) : null;
            GenerationConfig generation = GenerationConfig.load(modelDir, model.config());
            LlamaEngine engine = new LlamaEngine(model, tokenizer, generation, options, storage);
            if (tokenizer != null) {
                engine.own(tokenizer);
            }
            ChatTemplate.load(modelDir).ifPresent(engine::useChatTemplate);
            return engine;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the model in " + modelDir, e);
        }
    }

    /**
     * A model folder over the devices of {@code group}: tensor parallelism for attention and the dense MLPs, expert
     * parallelism for routed experts ({@link ShardLayout}). The weights are read once onto the host, split, and each
     * rank's slices uploaded to its device; the engine owns them, not the group (the caller closes it after the
     * engine). A group of one device is the single-device engine.
     *
     * @throws IllegalArgumentException when the model does not split over the group (naming what the degree does not
     *     divide), or for what a tensor-parallel engine does not do yet: decode graphs, a disaggregated role, host
     *     offload of KV pages, LoRA adapters, FP8 weights on the device
     */
    public static LlamaEngine load(Path modelDir, DeviceGroup group, EngineOptions options,
                                   WeightQuantization quantization, LoadProgress progress) {
        if (group.size() == 1) {
            return load(modelDir, group.device(0), options, quantization, progress);
        }
        refuseUnsharded(group.size(), options, quantization);
        DType storage = storageType(group.device(0));
        ShardedWeights shards;
        try (Device host = Devices.open("cpu");
             LlamaWeights full = LlamaWeights.loadToSplit(modelDir, host, storage, progress)) {
            shards = ShardedWeights.split(full, ShardLayout.of(full.config(), group.size()), group);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the weights in " + modelDir, e);
        }
        LlamaModel model = new LlamaModel(shards, group, storage, modelDir.toAbsolutePath().normalize().toString());
        try {
            LlamaEngine engine = build(modelDir, model, options, storage);
            engine.own(model);
            return engine;
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
    }

    private static void refuseUnsharded(int degree, EngineOptions options, WeightQuantization quantization) {
        String what = options.decodeGraphs() ? "decode graphs (a graph records one device's stream)"
                : options.role() != EngineRole.COLOCATED ? "a disaggregated role (a hand-off carries one device's pages)"
                : options.kvCache().cpuOffloadPages() > 0 ? "host offload of KV pages (it copies one device's pool)"
                : options.adapters() != null ? "LoRA adapters"
                : quantization != WeightQuantization.NONE ? "FP8 weights on the device"
                : null;
        if (what != null) {
            throw new IllegalArgumentException("tensor parallel " + degree + " does not run with " + what + " yet");
        }
    }

    private static DType storageType(Device device) {
        return device.isCuda() ? DType.BF16 : DType.F32;
    }
}
