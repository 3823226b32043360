package org.mstar.jobs;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.StepResult;
import org.mstar.flink.EngineFactory;

/**
 * The Llama engine on the CPU, built here instead of by the operator's default factory, in one of two test setups:
 * {@link #poisoned}, made to throw inside its step whenever it samples a request whose id starts with
 * {@link #POISON} (a fault of the serving path itself, raised where a broken kernel or sampler would raise it, in the
 * middle of a batch of other requests); or {@link #launchingAhead}, with decode graphs on, so that decode steps are
 * pre-planned and launched ahead of the step before them as on a GPU (the default factory turns graphs off on the CPU,
 * where a replay only re-runs the ops).
 */
final class CpuLlamaEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;
    static final String POISON = "poison";
    /** Decode steps launched ahead by the engines of this class, over every job and restart in this process. */
    private static final AtomicLong LAUNCHED_AHEAD = new AtomicLong();

    private final String modelDir;
    private final boolean poisoned;
    private final boolean decodeGraphs;

    private CpuLlamaEngineFactory(Path modelDir, boolean poisoned, boolean decodeGraphs) {
        this.modelDir = modelDir.toString();
        this.poisoned = poisoned;
        this.decodeGraphs = decodeGraphs;
    }

    static CpuLlamaEngineFactory poisoned(Path modelDir) {
        return new CpuLlamaEngineFactory(modelDir, true, false);
    }

    static CpuLlamaEngineFactory launchingAhead(Path modelDir) {
        return new CpuLlamaEngineFactory(modelDir, false, true);
    }

    static long launchedAhead() {
        return LAUNCHED_AHEAD.get();
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        Device cpu = Devices.open("cpu");
        LlamaEngine llama = LlamaEngineLoader.load(Path.of(modelDir), cpu,
                EngineOptions.cpuDefaults(512).withDecodeGraphs(decodeGraphs));
        if (poisoned) {
            llama.observeLogits((requestId, index, logits) -> {
                if (requestId.startsWith(POISON)) {
                    throw new IllegalStateException("injected fault sampling " + requestId);
                }
            });
        }
        return new ForwardingEngine(llama) {
            private long counted;

            @Override
            public StepResult step() {
                StepResult result = super.step();
                LAUNCHED_AHEAD.addAndGet(llama.launchedAhead() - counted);
                counted = llama.launchedAhead();
                return result;
            }

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
