package org.mstar.flink;

import java.util.ArrayDeque;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;
import org.mstar.device.Device;
import org.mstar.engine.EngineRole;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.PrefillHandoff;
import org.mstar.engine.StepResult;

/**
 * One device's turn, taken by every call that may run work on it. Engines sharing a device (subtasks in one
 * TaskManager) take turns, and whoever holds the turn has the device bound to its own thread first.
 *
 * <p>Who goes next: callers of {@link Precedence#DECODE} (decode engines) before the others, each kind in arrival
 * order, so a decode step waits at most for the step running when it asked (a prefill chunk, bounded by the prefill
 * engine's token budget), never behind a queue of prefill steps. A caller of the other kind that has watched
 * {@link #DECODE_TURNS_BEFORE_OTHERS} decode turns go first takes the next one, so prefill still advances under a
 * decode engine that steps back to back. Among equals it is fair: an engine that steps back to back (a prefill
 * operator's) cannot take the turn again before a thread that was already waiting.
 *
 * <p>The thread rule: Flink calls an operator from different threads over its life (the task's mailbox thread
 * for open, records, timers and snapshots; after a failover a new task thread; {@code close()} may come from
 * another one), and a CUDA context is current per thread. So the context is not made current once at open but at
 * every turn, on whichever thread takes it.
 */
@Internal
public final class DeviceTurn {
    /** Which callers go first when several wait. */
    public enum Precedence {
        /** Decode engines' calls: an inter-token latency waits on them. */
        DECODE,
        /** Everything else: prefill and colocated engines, weight loading, sizing. */
        OTHER;

        /** The precedence of an engine serving {@code role}. */
        public static Precedence of(EngineRole role) {
            return role == EngineRole.DECODE ? DECODE : OTHER;
        }
    }

    /**
     * Decode turns a waiting caller of the other kind lets go first before it takes one: enough that a decode
     * engine's steps are not held up under a stream of prefill steps, few enough that prefill keeps moving.
     */
    static final int DECODE_TURNS_BEFORE_OTHERS = 8;

    private final Device device;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final ArrayDeque<Thread> decodeWaiting = new ArrayDeque<>();
    private final ArrayDeque<Thread> othersWaiting = new ArrayDeque<>();
    private Thread holder;
    /** Nested calls of the holder (a call inside a call keeps the turn). */
    private int depth;
    /** Decode turns given in a row while other callers waited. */
    private int passedOver;

    public DeviceTurn(Device device) {
        this.device = device;
    }

    public Device device() {
        return device;
    }

    /** Runs {@code work} holding the turn, with the device bound to the calling thread. */
    public <T> T call(Supplier<T> work) {
        return call(Precedence.OTHER, work);
    }

    /** Runs {@code work} holding the turn, taken with {@code precedence}, with the device bound to the calling thread. */
    public <T> T call(Precedence precedence, Supplier<T> work) {
        acquire(precedence);
        try {
            device.bindToCurrentThread();
            return work.get();
        } finally {
            release();
        }
    }

    /** Runs {@code work} holding the turn, with the device bound to the calling thread. */
    public void run(Runnable work) {
        run(Precedence.OTHER, work);
    }

    private void run(Precedence precedence, Runnable work) {
        call(precedence, () -> {
            work.run();
            return null;
        });
    }

    private void acquire(Precedence precedence) {
        Thread me = Thread.currentThread();
        lock.lock();
        try {
            if (holder == me) {
                depth++;
                return;
            }
            ArrayDeque<Thread> queue = precedence == Precedence.DECODE ? decodeWaiting : othersWaiting;
            queue.addLast(me);
            try {
                while (holder != null || next() != me) {
                    changed.awaitUninterruptibly();
                }
            } finally {
                queue.remove(me);
            }
            // counts only decode turns that an other caller watched go first, since the last other turn
            passedOver = precedence == Precedence.DECODE && !othersWaiting.isEmpty() ? passedOver + 1 : 0;
            holder = me;
            depth = 1;
        } finally {
            lock.unlock();
        }
    }

    /** Whose turn is next among the waiting threads. */
    private Thread next() {
        if (!othersWaiting.isEmpty() && (decodeWaiting.isEmpty() || passedOver >= DECODE_TURNS_BEFORE_OTHERS)) {
            return othersWaiting.peekFirst();
        }
        return decodeWaiting.peekFirst();
    }

    private void release() {
        lock.lock();
        try {
            if (--depth == 0) {
                holder = null;
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** Threads waiting for the turn. */
    @VisibleForTesting
    int waiting() {
        lock.lock();
        try {
            return decodeWaiting.size() + othersWaiting.size();
        } finally {
            lock.unlock();
        }
    }

    /** {@code engine}, taking this turn for every call that may run device work, with the other kind's precedence. */
    public GenerationEngine guard(GenerationEngine engine) {
        return guard(engine, Precedence.OTHER);
    }

    /** {@code engine}, taking this turn with {@code precedence} for every call that may run device work. */
    public GenerationEngine guard(GenerationEngine engine, Precedence precedence) {
        return new Guarded(engine, this, precedence);
    }

    private static final class Guarded extends ForwardingEngine {
        private final DeviceTurn turn;
        private final Precedence precedence;

        Guarded(GenerationEngine engine, DeviceTurn turn, Precedence precedence) {
            super(engine);
            this.turn = turn;
            this.precedence = precedence;
        }

        @Override
        public void submit(GenerationRequest request) {
            turn.run(precedence, () -> engine.submit(request));
        }

        @Override
        public void resume(GenerationRequest request, int[] generated) {
            turn.run(precedence, () -> engine.resume(request, generated));
        }

        @Override
        public void receive(GenerationRequest request, PrefillHandoff handoff) {
            turn.run(precedence, () -> engine.receive(request, handoff));
        }

        @Override
        public StepResult step() {
            return turn.call(precedence, engine::step);
        }

        @Override
        public void remove(String requestId) {
            turn.run(precedence, () -> engine.remove(requestId));
        }

        @Override
        public void close() {
            turn.run(precedence, engine::close);
        }
    }
}
