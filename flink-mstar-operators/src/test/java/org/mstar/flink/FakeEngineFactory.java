package org.mstar.flink;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;

/**
 * Builds {@link FakeEngine}s inside a job. Engines of one {@link Scenario} (looked up by name, as the factory is
 * serialised into the job graph while MiniCluster runs in the test's JVM) share its counters and the failures a
 * test injects.
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

    /** Shared by the engines of one test: counts what they did and fails them when the test says so. */
    public static final class Scenario implements FakeEngine.Hooks {
        private static final Map<String, Scenario> ALL = new ConcurrentHashMap<>();

        final AtomicInteger engines = new AtomicInteger();
        final AtomicInteger resumedMidGeneration = new AtomicInteger();
        private final Semaphore failures = new Semaphore(0);
        private boolean failNextStep;
        private volatile boolean paused;

        /** A fresh scenario under {@code name}. */
        public static Scenario start(String name) {
            Scenario s = new Scenario();
            ALL.put(name, s);
            return s;
        }

        /** The next step of any engine of this scenario that produces tokens throws. */
        public synchronized void failNextStep() {
            failNextStep = true;
        }

        /** Holds every engine of this scenario mid-generation until {@link #unpause}. */
        public void pause() {
            paused = true;
        }

        public void unpause() {
            paused = false;
        }

        @Override
        public boolean paused() {
            return paused;
        }

        /** Waits until {@code count} injected failures happened in all. */
        public void awaitFailures(int count, Duration timeout) throws InterruptedException {
            if (!failures.tryAcquire(count, timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError("fewer than " + count + " injected failures within " + timeout);
            }
            failures.release(count);
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

        @Override
        public synchronized void onStep(int count) {
            if (failNextStep && count > 0) {
                failNextStep = false;
                failures.release();
                throw new IllegalStateException("injected engine failure");
            }
        }

        @Override
        public void onResumeMidGeneration() {
            resumedMidGeneration.incrementAndGet();
        }
    }
}
