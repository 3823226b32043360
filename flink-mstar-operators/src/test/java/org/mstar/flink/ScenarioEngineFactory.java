package org.mstar.flink;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;

/**
 * Wraps the engines of another factory so a test can watch and disturb them through a {@link Scenario}: count
 * engines and mid-generation resumes, fail a step, hold generation. Scenarios are found by name, as the factory
 * is serialised into the job graph while the MiniCluster runs in the test's JVM.
 */
public final class ScenarioEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    private final String scenario;
    private final EngineFactory delegate;

    public ScenarioEngineFactory(String scenario, EngineFactory delegate) {
        this.scenario = scenario;
        this.delegate = delegate;
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) throws Exception {
        Scenario s = Scenario.named(scenario);
        s.engines.incrementAndGet();
        return new WatchedEngine(delegate.create(device, subtaskIndex), s);
    }

    /** Shared by the engines of one test. */
    public static final class Scenario {
        private static final Map<String, Scenario> ALL = new ConcurrentHashMap<>();

        private final AtomicInteger engines = new AtomicInteger();
        private final AtomicInteger resumedMidGeneration = new AtomicInteger();
        private final Semaphore failures = new Semaphore(0);
        private final CountDownLatch pausedByTokens = new CountDownLatch(1);
        private volatile boolean failNextStep;
        private volatile boolean paused;
        private long tokens;
        private long pauseAtTokens = Long.MAX_VALUE;

        /** A fresh scenario under {@code name}. */
        public static Scenario start(String name) {
            Scenario s = new Scenario();
            ALL.put(name, s);
            return s;
        }

        static Scenario named(String name) {
            return ALL.computeIfAbsent(name, n -> new Scenario());
        }

        /** Engines built so far; one per subtask and (re)start. */
        public int engines() {
            return engines.get();
        }

        /** Requests resumed with at least one generated token. */
        public int resumedMidGeneration() {
            return resumedMidGeneration.get();
        }

        /** The next step of any engine of this scenario that produces tokens throws. */
        public void failNextStep() {
            failNextStep = true;
        }

        /** Waits until {@code count} injected failures happened in all. */
        public void awaitFailures(int count, Duration timeout) throws InterruptedException {
            if (!failures.tryAcquire(count, timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError("fewer than " + count + " injected failures within " + timeout);
            }
            failures.release(count);
        }

        /** Holds every engine of this scenario where it is, as if the device were very slow, until {@link #unpause}. */
        public void pause() {
            paused = true;
        }

        public void unpause() {
            paused = false;
        }

        /** Pauses the engines once they generated {@code count} tokens in all. */
        public synchronized void pauseAfterTokens(long count) {
            pauseAtTokens = count;
        }

        /** Waits for the pause {@link #pauseAfterTokens} asked for; returns the tokens generated until then. */
        public long awaitPausedByTokens(Duration timeout) throws InterruptedException {
            if (!pausedByTokens.await(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError("engines not paused within " + timeout);
            }
            synchronized (this) {
                return tokens;
            }
        }

        private synchronized void afterStep(StepResult result) {
            if (failNextStep && !result.tokens().isEmpty()) {
                failNextStep = false;
                failures.release();
                throw new IllegalStateException("injected engine failure");
            }
            tokens += result.tokens().size();
            if (tokens >= pauseAtTokens) {
                pauseAtTokens = Long.MAX_VALUE;
                paused = true;
                pausedByTokens.countDown();
            }
        }
    }

    private static final class WatchedEngine extends ForwardingEngine {
        private final Scenario scenario;

        WatchedEngine(GenerationEngine engine, Scenario scenario) {
            super(engine);
            this.scenario = scenario;
        }

        @Override
        public void resume(GenerationRequest request, int[] generated) {
            engine.resume(request, generated);
            if (generated.length > 0) {
                scenario.resumedMidGeneration.incrementAndGet();
            }
        }

        @Override
        public StepResult step() {
            if (scenario.paused) {
                LockSupport.parkNanos(1_000_000);
                return StepResult.EMPTY;
            }
            StepResult result = engine.step();
            scenario.afterStep(result);
            return result;
        }
    }
}
