package org.mstar.jobs;

import java.time.Duration;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.LlamaEngineFactory;

/**
 * The Llama engine, built {@link #BUILD_TIME} late, as a model whose weights take that long to load would be: for
 * {@code serve --engine-factory} in a child JVM.
 */
public final class SlowStartEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;
    static final Duration BUILD_TIME = Duration.ofSeconds(12);
    /** Written to the console once an engine is built, with the time (epoch ms). */
    static final String BUILT = "slow engine built";

    private final LlamaEngineFactory llama;

    public SlowStartEngineFactory(ReadableConfig config) {
        this.llama = new LlamaEngineFactory(config);
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) throws Exception {
        Thread.sleep(BUILD_TIME.toMillis()); // the load time this factory stands for, not a wait for anything
        GenerationEngine engine = llama.create(device, subtaskIndex);
        System.err.println(BUILT + " at " + System.currentTimeMillis() + " (subtask " + subtaskIndex + ")");
        return engine;
    }
}
