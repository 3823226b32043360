package org.mstar.jobs;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.mstar.engine.frame.FrameInput;
import org.mstar.engine.frame.FrameResult;
import org.mstar.engine.frame.FrameSessions;
import org.mstar.engine.frame.SessionRanking;
import org.mstar.flink.frame.FrameEngineFactory;
import org.mstar.model.frame.FrameModelConfig;

/**
 * Wraps a frame engine factory so a test can make the next step of any subtask throw once (a task failure) and
 * count the sessions rebuilt by replay; per test name, as the MiniCluster shares this JVM.
 */
final class FaultyFrameEngineFactory implements FrameEngineFactory {
    private static final long serialVersionUID = 1L;
    private static final Map<String, AtomicBoolean> ARMED = new ConcurrentHashMap<>();
    private static final Map<String, AtomicInteger> FAILURES = new ConcurrentHashMap<>();
    private static final Map<String, AtomicInteger> REPLAYS = new ConcurrentHashMap<>();

    private final String name;
    private final FrameEngineFactory delegate;

    FaultyFrameEngineFactory(String name, FrameEngineFactory delegate) {
        this.name = name;
        this.delegate = delegate;
        ARMED.put(name, new AtomicBoolean());
        FAILURES.put(name, new AtomicInteger());
        REPLAYS.put(name, new AtomicInteger());
    }

    void failNextStep() {
        ARMED.get(name).set(true);
    }

    int failures() {
        return FAILURES.get(name).get();
    }

    int replays() {
        return REPLAYS.get(name).get();
    }

    @Override
    public FrameSessions create(String device, int subtaskIndex) throws Exception {
        FrameSessions engine = delegate.create(device, subtaskIndex);
        AtomicBoolean armed = ARMED.get(name);
        AtomicInteger failures = FAILURES.get(name);
        AtomicInteger replays = REPLAYS.get(name);
        return new FrameSessions() {
            @Override public FrameModelConfig config() { return engine.config(); }
            @Override public SessionRanking ranking() { return engine.ranking(); }
            @Override public boolean hasRoom() { return engine.hasRoom(); }
            @Override public void open(String sessionId) { engine.open(sessionId); }
            @Override public void close(String sessionId) { engine.close(sessionId); }
            @Override public String refusal(FrameInput in) { return engine.refusal(in); }
            @Override public void close() { engine.close(); }

            @Override
            public void openAt(String sessionId, int firstFrame) {
                replays.incrementAndGet();
                engine.openAt(sessionId, firstFrame);
            }

            @Override
            public List<FrameResult> step(List<FrameInput> inputs, boolean keepLogits) {
                if (armed.compareAndSet(true, false)) {
                    failures.incrementAndGet();
                    throw new IllegalStateException("injected frame step failure");
                }
                return engine.step(inputs, keepLogits);
            }
        };
    }
}
