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
        HybridWeights weights = loadWeights(modelDir, device);
        try {
            HybridEngine engine = over(modelDir, weights, options, snapshots);
            engine.own(weights);
            return engine;
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
    }

    /** The weights of the model in {@code modelDir} on {@code device}, in the dtype the device computes in. */
    public static HybridWeights loadWeights(Path modelDir, Device device) {
        try {
            return HybridWeights.load(modelDir, HybridConfig.load(modelDir), device, storage(device));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the model in " + modelDir, e);
        }
    }

    /**
     * An engine over {@code weights} loaded from {@code modelDir} by {@link #loadWeights}, which it does not own:
     * engines on one device share them (closing an engine leaves them loaded).
     */
    public static HybridEngine over(Path modelDir, HybridWeights weights, EngineOptions options,
                                    StateSnapshots snapshots) {
        try {
            HybridConfig config = HybridConfig.load(modelDir);
            DType storage = storage(weights.device());
            HybridModel model = new HybridModel(weights, storage, modelDir.toAbsolutePath().normalize().toString(),
                    options.maxBatchRows(), snapshots);
            Path tokenizerFile = modelDir.resolve(TextTokenizer.FILE_NAME);
            TextTokenizer tokenizer = Files.exists(tokenizerFile) ? TextTokenizer.load(modelDir) : null;
            HybridEngine engine = new HybridEngine(model, tokenizer, config.generation(modelDir), options, storage);
            if (tokenizer != null) {
                engine.own(tokenizer);
            }
            return engine;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the model in " + modelDir, e);
        }
    }

    private static DType storage(Device device) {
        return device.isCuda() ? DType.BF16 : DType.F32;
    }
}
