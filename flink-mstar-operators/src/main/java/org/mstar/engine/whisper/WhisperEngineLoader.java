package org.mstar.engine.whisper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Function;
import org.mstar.device.DType;
import org.mstar.device.Device;
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
     */
    public static WhisperEngine load(Path modelDir, Device device, Function<float[], float[]> melFeatures,
                                     WhisperEngineOptions options) {
        try {
            WhisperConfig config = WhisperConfig.load(modelDir);
            Function<float[], float[]> features = melFeatures != null ? melFeatures : logMel(config.numMelBins());
            DType storage = device.isCuda() ? DType.BF16 : DType.F32;
            WhisperWeights weights = WhisperWeights.load(modelDir, config, device, storage);
            try {
                Path tokenizerFile = modelDir.resolve(TextTokenizer.FILE_NAME);
                TextTokenizer tokenizer = Files.exists(tokenizerFile) ? TextTokenizer.load(modelDir) : null;
                WhisperEngine engine = new WhisperEngine(new WhisperModel(weights, storage), tokenizer, features,
                        options, storage);
                engine.own(weights);
                if (tokenizer != null) {
                    engine.own(tokenizer);
                }
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
