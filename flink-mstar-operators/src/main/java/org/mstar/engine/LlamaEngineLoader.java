package org.mstar.engine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Builds a {@link LlamaEngine} from a Hugging Face model folder (config.json, safetensors weights,
 * tokenizer.json, generation_config.json). Precision follows the device: fp32 weights, activations and
 * KV on the CPU reference; bf16 storage with fp32 accumulation on a GPU.
 */
public final class LlamaEngineLoader {
    private LlamaEngineLoader() {}

    public static LlamaEngine load(Path modelDir, Device device, EngineOptions options) {
        try {
            ModelConfig config = ModelConfig.load(modelDir.resolve(ModelConfig.FILE_NAME));
            DType storage = device.isCuda() ? DType.BF16 : DType.F32;
            LlamaWeights weights = LlamaWeights.load(modelDir, device, storage);
            LlamaModel model = new LlamaModel(weights, storage, modelDir.toAbsolutePath().normalize().toString());
            Path tokenizerFile = modelDir.resolve(TextTokenizer.FILE_NAME);
            TextTokenizer tokenizer = Files.exists(tokenizerFile) ? TextTokenizer.load(modelDir) : null;
            GenerationConfig generation = GenerationConfig.load(modelDir, config);
            LlamaEngine engine = new LlamaEngine(model, tokenizer, generation, options, storage);
            engine.own(model);
            if (tokenizer != null) {
                engine.own(tokenizer);
            }
            return engine;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the model in " + modelDir, e);
        }
    }
}
