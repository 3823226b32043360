package org.mstar.flink;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;

/**
 * Builds {@link FakeEngine}s inside a job. Engines of one {@link Scenario} (looked up by name, as the factory is
 * serialised into the job graph while MiniCluster runs in the test's JVM) share its counters and its planned
 * failures.
 */
public final class FakeEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    public static final int CONTEXT_LENGTH = 64;

    private final String scenario;
    private final int maxRunning;
    private final long stepNanos;

    public FakeEngineFactory(String scenario, int maxRunning, Duration stepTime) {
        this.scenario = scenario;
        this.maxRunning = maxRunning;
        this.stepNanos = stepTime.toNanos();
    }

    /** The constructor {@link EngineFactory#fromConfig} uses: a small batch and 2 ms steps. */
    public FakeEngineFactory(ReadableConfig config) {
        this("from-config", 4, Duration.ofMillis(2));
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        Scenario s = Scenario.named(scenario);
        s.engines.incrementAndGet();
        return new FakeEngine(maxRunning, CONTEXT_LENGTH, stepNanos, s);
    }

    /** Shared by the engines of one test: counts what they did and fails them at planned token counts. */
    public static final class Scenario implements FakeEngine.Hooks {
        private static final Map<String, Scenario> ALL = new ConcurrentHashMap<>();

        final AtomicInteger engines = new AtomicInteger();
        final AtomicInteger resumedMidGeneration = new AtomicInteger();
        final AtomicInteger failures = new AtomicInteger();
        private final ArrayDeque<Long> failAt = new ArrayDeque<>();
        private long tokens;

        /**
         * A fresh scenario under {@code name}.
         *
         * @param failAtTokens ascending totals of generated tokens (over all engines, regenerated ones included)
         *     at which the step reaching each throws once
         */
        public static Scenario start(String name, long... failAtTokens) {
            Scenario s = new Scenario();
            for (long t : failAtTokens) {
                s.failAt.add(t);
            }
            ALL.put(name, s);
            return s;
        }

        static Scenario named(String name) {
            return ALL.computeIfAbsent(name, n -> new Scenario());
        }

        public int engines() {
            return engines.get();
        }

        public int resumedMidGeneration() {
            return resumedMidGeneration.get();
        }

        public int failures() {
            return failures.get();
        }

        @Override
        public synchronized void onStep(int count) {
            tokens += count;
            if (!failAt.isEmpty() && tokens >= failAt.peek()) {
                failAt.poll();
                failures.incrementAndGet();
                throw new IllegalStateException("injected engine failure after " + tokens + " tokens");
            }
        }

        @Override
        public void onResumeMidGeneration() {
            resumedMidGeneration.incrementAndGet();
        }
    }
}
