package org.mstar.flink;

import java.io.Serializable;
import java.time.Duration;
import org.apache.flink.configuration.ReadableConfig;

/**
 * The {@link GenerateOperator}'s configuration, read once from {@link GenerateOptions} where the job is built.
 *
 * @param maxWaiting see {@link GenerateOptions#MAX_WAITING}
 * @param queueTimeout see {@link GenerateOptions#QUEUE_TIMEOUT}; {@link Duration#ZERO} = off
 * @param device see {@link GenerateOptions#DEVICE}
 * @param gpuResource see {@link GenerateOptions#GPU_RESOURCE}
 * @param defaultMaxTokens see {@link GenerateOptions#DEFAULT_MAX_TOKENS}
 * @param modelDir see {@link GenerateOptions#MODEL_DIR}; null when not set
 * @param requestIdRetention see {@link GenerateOptions#REQUEST_ID_RETENTION}; {@link Duration#ZERO} = off
 * @param maxAudio see {@link GenerateOptions#AUDIO_MAX_DURATION}
 * @param audioDir see {@link GenerateOptions#AUDIO_DIR}; null when not set
 */
record GenerateSettings(int maxWaiting, Duration queueTimeout, String device, String gpuResource,
                        int defaultMaxTokens, String modelDir, Duration requestIdRetention, Duration maxAudio,
                        String audioDir) implements Serializable {

    GenerateSettings {
        if (maxWaiting < 1) {
            throw new IllegalArgumentException("'" + GenerateOptions.MAX_WAITING.key() + "' must be >= 1, got " + maxWaiting);
        }
        if (defaultMaxTokens < 1) {
            throw new IllegalArgumentException("'" + GenerateOptions.DEFAULT_MAX_TOKENS.key() + "' must be >= 1, got "
                    + defaultMaxTokens);
        }
        DeviceAssignment.validate(device);
        if (queueTimeout.isNegative()) {
            throw new IllegalArgumentException("'" + GenerateOptions.QUEUE_TIMEOUT.key() + "' must not be negative");
        }
        if (requestIdRetention.isNegative()) {
            throw new IllegalArgumentException("'" + GenerateOptions.REQUEST_ID_RETENTION.key() + "' must not be negative");
        }
        if (maxAudio.isNegative() || maxAudio.isZero()) {
            throw new IllegalArgumentException("'" + GenerateOptions.AUDIO_MAX_DURATION.key() + "' must be positive");
        }
    }

    static GenerateSettings from(ReadableConfig config) {
        return new GenerateSettings(config.get(GenerateOptions.MAX_WAITING),
                config.getOptional(GenerateOptions.QUEUE_TIMEOUT).orElse(Duration.ZERO),
                config.get(GenerateOptions.DEVICE), config.get(GenerateOptions.GPU_RESOURCE),
                config.get(GenerateOptions.DEFAULT_MAX_TOKENS), config.getOptional(GenerateOptions.MODEL_DIR).orElse(null),
                config.get(GenerateOptions.REQUEST_ID_RETENTION), config.get(GenerateOptions.AUDIO_MAX_DURATION),
                config.getOptional(GenerateOptions.AUDIO_DIR).orElse(null));
    }

    RequestConverter converter() {
        return new RequestConverter(defaultMaxTokens, new AudioConverter(maxAudio, audioDir));
    }
}
