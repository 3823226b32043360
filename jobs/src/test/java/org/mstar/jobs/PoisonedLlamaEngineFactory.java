package org.mstar.jobs;

import java.nio.file.Path;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.flink.EngineFactory;

/**
 * The Llama engine on the CPU, made to throw inside its step whenever it samples a request whose id starts with
 * {@link #POISON}: a fault of the serving path itself (not a validation error), raised where a broken kernel or
 * sampler would raise it, in the middle of a batch of other requests.
 */
final class PoisonedLlamaEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;
    static final String POISON = "poison";

    private final String modelDir;

    PoisonedLlamaEngineFactory(Path modelDir) {
        this.modelDir = modelDir.toString();
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        Device cpu = Devices.open("cpu");
        LlamaEngine engine = LlamaEngineLoader.load(Path.of(modelDir), cpu, EngineOptions.cpuDefaults(512));
        engine.observeLogits((requestId, index, logits) -> {
            if (requestId.startsWith(POISON)) {
                throw new IllegalStateException("injected fault sampling " + requestId);
            }
        });
        return new ForwardingEngine(engine) {
            @Override
            public void close() {
                try {
                    super.close();
                } finally {
                    cpu.close();
                }
            }
        };
    }
}
