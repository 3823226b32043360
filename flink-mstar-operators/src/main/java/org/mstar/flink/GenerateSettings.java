package org.mstar.flink;

import java.io.Serializable;
import java.time.Duration;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;

/**
 * The {@link GenerateOperator}'s configuration, read once from {@link GenerateOptions} where the job is built.
 *
 * @param maxWaiting see {@link GenerateOptions#MAX_WAITING}; null when not set
 * @param queueTimeout see {@link GenerateOptions#QUEUE_TIMEOUT}; {@link Duration#ZERO} = off
 * @param device see {@link GenerateOptions#DEVICE}
 * @param gpuResource see {@link GenerateOptions#GPU_RESOURCE}
 * @param defaultMaxTokens see {@link GenerateOptions#DEFAULT_MAX_TOKENS}
 * @param modelDir see {@link GenerateOptions#MODEL_DIR}; null when not set
 * @param requestIdRetention see {@link GenerateOptions#REQUEST_ID_RETENTION}; {@link Duration#ZERO} = off
 * @param maxAudio see {@link GenerateOptions#AUDIO_MAX_DURATION}
 * @param audioDir see {@link GenerateOptions#AUDIO_DIR}; null when not set
 */
record GenerateSettings(Integer maxWaiting, Duration queueTimeout, String device, String gpuResource,
                        int defaultMaxTokens, String modelDir, Duration requestIdRetention, Duration maxAudio,
                        String audioDir) implements Serializable {

    GenerateSettings {
        if (maxWaiting != null && maxWaiting < 1) {
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
        return new GenerateSettings(config.getOptional(GenerateOptions.MAX_WAITING).orElse(null),
                config.getOptional(GenerateOptions.QUEUE_TIMEOUT).orElse(Duration.ZERO),
                config.get(GenerateOptions.DEVICE), config.get(GenerateOptions.GPU_RESOURCE),
                config.get(GenerateOptions.DEFAULT_MAX_TOKENS), config.getOptional(GenerateOptions.MODEL_DIR).orElse(null),
                config.get(GenerateOptions.REQUEST_ID_RETENTION), config.get(GenerateOptions.AUDIO_MAX_DURATION),
                config.getOptional(GenerateOptions.AUDIO_DIR).orElse(null));
    }

    /** The most waiting requests for {@code engine}: as set, else its batch rows (at least the minimum). */
    int maxWaiting(GenerationEngine engine) {
        return maxWaiting != null ? maxWaiting : Math.max(GenerateOptions.MIN_WAITING, engine.maxBatchRows());
    }

    RequestConverter converter() {
        return new RequestConverter(defaultMaxTokens, new AudioConverter(maxAudio, audioDir));
    }
}
