package org.mstar.model.mamba;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.GenerationConfig;
import org.mstar.model.HybridConfig;
import org.mstar.model.io.SafetensorsWriter;
import org.mstar.model.tokenizer.ByteLevelBpeTokenizerJson;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Writes random Mamba2 or Bamba weights ({@link HybridWeights#random}) as a complete Hugging Face model folder that
 * {@code HybridEngineLoader} and transformers both load: the given config.json, generation_config.json, fp32
 * safetensors under the checkpoint names, and a synthetic byte-level tokenizer.json ({@link ByteLevelBpeTokenizerJson})
 * whose special tokens sit at the config's bos / eos ids. Used by {@code mstar serve --random} and {@code generate
 * --random} with a hybrid config.json.
 */
public final class HybridCheckpointWriter {
    private static final ObjectMapper JSON = new ObjectMapper();

    private HybridCheckpointWriter() {}

    /**
     * Writes random weights of {@code config}, read from {@code configJson}, into {@code folder} (created if needed),
     * built in host memory.
     */
    public static void writeRandom(HybridConfig config, JsonNode configJson, long seed, Path folder)
            throws IOException {
        Files.createDirectories(folder);
        var json = JSON.writerWithDefaultPrettyPrinter();
        json.writeValue(folder.resolve("config.json").toFile(), configJson);
        json.writeValue(folder.resolve(GenerationConfig.FILE_NAME).toFile(),
                new GenerationConfig(config.bosTokenId(), config.eosTokenIds()).toJson());
        ByteLevelBpeTokenizerJson.write(folder.resolve(TextTokenizer.FILE_NAME), config.vocabSize(),
                config.bosTokenId(), config.eosTokenIds());
        try (CpuDevice cpu = new CpuDevice(1);
             HybridWeights weights = HybridWeights.random(config, cpu, DType.F32, seed)) {
            SafetensorsWriter tensors = new SafetensorsWriter();
            weights.hfTensors().forEach(tensors::add);
            tensors.writeCheckpoint(folder, Long.MAX_VALUE);
        }
    }
}
