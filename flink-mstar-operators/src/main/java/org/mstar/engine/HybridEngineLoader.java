package org.mstar.engine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.model.HybridConfig;
import org.mstar.model.mamba.HybridModel;
import org.mstar.model.mamba.HybridWeights;
import org.mstar.model.mamba.StateSnapshots;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Builds a {@link HybridEngine} from a Hugging Face folder of a Mamba2 or Bamba model (config.json, safetensors
 * weights, tokenizer.json and generation_config.json when present). Precision follows the device as for the Llama
 * family: fp32 on the CPU reference, bf16 storage with fp32 accumulation on a GPU; recurrent states are fp32 on both.
 * The state pool has a slot for each of the engine's batch rows; with the prefix cache on, state snapshots are kept
 * as {@link StateSnapshots#defaults} says unless given.
 */
public final class HybridEngineLoader {
    private HybridEngineLoader() {}

    /** Load the weights and build an engine that owns them (closing the engine frees them). */
    public static HybridEngine load(Path modelDir, Device device, EngineOptions options) {
        return load(modelDir, device, options, StateSnapshots.defaults(options.maxBatchRows()));
    }

    /** {@link #load(Path, Device, EngineOptions)} keeping state snapshots for the prefix cache as {@code snapshots}. */
    public static HybridEngine load(Path modelDir, Device device, EngineOptions options, StateSnapshots snapshots) {
        DType storage = device.isCuda() ? DType.BF16 : DType.F32;
        try {
            HybridConfig config = HybridConfig.load(modelDir);
            HybridWeights weights = HybridWeights.load(modelDir, config, device, storage);
            try {
                HybridModel model = new HybridModel(weights, storage, modelDir.toAbsolutePath().normalize().toString(),
                        options.maxBatchRows(), snapshots);
                Path tokenizerFile = modelDir.resolve(TextTokenizer.FILE_NAME);
                TextTokenizer tokenizer = Files.exists(tokenizerFile) ? TextTokenizer.load(modelDir) : null;
                HybridEngine engine = new HybridEngine(model, tokenizer, config.generation(modelDir), options, storage);
                engine.own(weights);
                if (tokenizer != null) {
                    engine.own(tokenizer);
                }
                return engine;
            } catch (RuntimeException e) {
                weights.close();
                throw e;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the model in " + modelDir, e);
        }
    }
}
