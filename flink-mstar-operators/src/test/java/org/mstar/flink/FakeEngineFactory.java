package org.mstar.flink;

import java.time.Duration;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;

/** Builds a {@link FakeEngine} per subtask. */
public final class FakeEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    public static final int CONTEXT_LENGTH = 64;

    private final int maxRunning;
    private final long stepNanos;

    public FakeEngineFactory(int maxRunning, Duration stepTime) {
        this.maxRunning = maxRunning;
        this.stepNanos = stepTime.toNanos();
    }

    /** The constructor {@link EngineFactory#fromConfig} uses: a small batch and 2 ms steps. */
    public FakeEngineFactory(ReadableConfig config) {
        this(4, Duration.ofMillis(2));
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        return new FakeEngine(maxRunning, CONTEXT_LENGTH, stepNanos);
    }
}
