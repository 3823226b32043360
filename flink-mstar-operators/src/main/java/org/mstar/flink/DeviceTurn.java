package org.mstar.flink;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.apache.flink.annotation.Internal;
import org.mstar.device.Device;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.PrefillHandoff;
import org.mstar.engine.StepResult;

/**
 * One device's turn, taken by every call that may run work on it. Engines sharing a device (subtasks in one
 * TaskManager) take turns, and whoever holds the turn has the device bound to its own thread first.
 *
 * <p>The thread rule: Flink calls an operator from different threads over its life (the task's mailbox thread
 * for open, records, timers and snapshots; after a failover a new task thread; {@code close()} may come from
 * another one), and a CUDA context is current per thread. So the context is not made current once at open but at
 * every turn, on whichever thread takes it.
 */
@Internal
public final class DeviceTurn {
    private final Device device;
    /**
     * Fair: an engine that steps back to back (a prefill operator's) would otherwise take the turn again before
     * the thread waiting for it woke, and starve the other engines on the device.
     */
    private final ReentrantLock lock = new ReentrantLock(true);

    public DeviceTurn(Device device) {
        this.device = device;
    }

    public Device device() {
        return device;
    }

    /** Runs {@code work} holding the turn, with the device bound to the calling thread. */
    public <T> T call(Supplier<T> work) {
        lock.lock();
        try {
            device.bindToCurrentThread();
            return work.get();
        } finally {
            lock.unlock();
        }
    }

    /** Runs {@code work} holding the turn, with the device bound to the calling thread. */
    public void run(Runnable work) {
        call(() -> {
            work.run();
            return null;
        });
    }

    /** {@code engine}, taking this turn for every call that may run device work. */
    public GenerationEngine guard(GenerationEngine engine) {
        return new Guarded(engine, this);
    }

    private static final class Guarded extends ForwardingEngine {
        private final DeviceTurn turn;

        Guarded(GenerationEngine engine, DeviceTurn turn) {
            super(engine);
            this.turn = turn;
        }

        @Override
        public void submit(GenerationRequest request) {
            turn.run(() -> engine.submit(request));
        }

        @Override
        public void resume(GenerationRequest request, int[] generated) {
            turn.run(() -> engine.resume(request, generated));
        }

        @Override
        public void receive(GenerationRequest request, PrefillHandoff handoff) {
            turn.run(() -> engine.receive(request, handoff));
        }

        @Override
        public StepResult step() {
            return turn.call(engine::step);
        }

        @Override
        public void remove(String requestId) {
            turn.run(() -> engine.remove(requestId));
        }

        @Override
        public void close() {
            turn.run(engine::close);
        }
    }
}
