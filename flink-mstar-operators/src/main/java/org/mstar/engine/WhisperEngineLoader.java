package org.mstar.engine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Function;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.model.ModelFormatException;
import org.mstar.model.llama.LoadProgress;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;
import org.mstar.model.whisper.WhisperWeights;
import org.mstar.model.whisper.audio.LogMelSpectrogram;

/**
 * Builds a {@link WhisperEngine} from a Hugging Face Whisper folder (config.json, generation_config.json,
 * safetensors, tokenizer.json). Precision follows the device: fp32 weights, activations and KV on the CPU
 * reference; bf16 storage with fp32 accumulation on a GPU.
 */
public final class WhisperEngineLoader {
    private WhisperEngineLoader() {}

    /**
     * Load the weights and build an engine that owns them, featurising audio as transformers'
     * WhisperFeatureExtractor does ({@link LogMelSpectrogram} with the model's mel bins).
     */
    public static WhisperEngine load(Path modelDir, Device device, WhisperEngineOptions options) {
        return load(modelDir, device, null, options);
    }

    /**
     * Load the weights and build an engine that owns them (closing the engine frees them).
     *
     * @param melFeatures one window's samples → log-mel features {@code [melFrames, mels]}, frames-major; null for
     *     {@link LogMelSpectrogram}'s
     * @throws ModelFormatException when the folder has no tokenizer.json: without it every transcript would be
     *     empty text
     */
    public static WhisperEngine load(Path modelDir, Device device, Function<float[], float[]> melFeatures,
                                     WhisperEngineOptions options) {
        return load(modelDir, device, melFeatures, options, LoadProgress.NONE);
    }

    /** As {@link #load(Path, Device, Function, WhisperEngineOptions)}, telling {@code progress} how much is loaded. */
    public static WhisperEngine load(Path modelDir, Device device, Function<float[], float[]> melFeatures,
                                     WhisperEngineOptions options, LoadProgress progress) {
        Path tokenizerFile = modelDir.resolve(TextTokenizer.FILE_NAME);
        if (!Files.isRegularFile(tokenizerFile)) {
            throw new ModelFormatException(tokenizerFile + " is missing: a Whisper folder needs its tokenizer to turn"
                    + " the tokens into text");
        }
        try {
            WhisperConfig config = WhisperConfig.load(modelDir);
            Function<float[], float[]> features = melFeatures != null ? melFeatures : logMel(config.numMelBins());
            DType storage = device.isCuda() ? DType.BF16 : DType.F32;
            WhisperWeights weights = WhisperWeights.load(modelDir, config, device, storage, progress);
            try {
                TextTokenizer tokenizer = TextTokenizer.load(modelDir);
                WhisperEngine engine = new WhisperEngine(new WhisperModel(weights, storage), tokenizer, features,
                        options, storage);
                engine.own(weights);
                engine.own(tokenizer);
                return engine;
            } catch (RuntimeException | IOException e) {
                weights.close();
                throw e;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load the Whisper model in " + modelDir, e);
        }
    }

    /** {@link LogMelSpectrogram}'s features of a window, turned frames-major as the encoder's convolution reads them. */
    public static Function<float[], float[]> logMel(int melBins) {
        LogMelSpectrogram spectrogram = new LogMelSpectrogram(melBins);
        return samples -> LogMelSpectrogram.framesMajor(spectrogram.compute(samples), melBins);
    }
}
