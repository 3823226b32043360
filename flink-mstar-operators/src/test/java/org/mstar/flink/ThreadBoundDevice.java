package org.mstar.flink;

import java.lang.reflect.Proxy;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.mstar.device.Device;
import org.mstar.engine.EngineStats;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;

/**
 * A device that behaves like a CUDA context as far as threads go: it is current per thread, made current by
 * {@link Device#bindToCurrentThread}. It runs nothing; {@link #engine} wraps an engine so that every call which
 * would run device work fails unless the device is current on the calling thread. Records which threads bound it.
 */
final class ThreadBoundDevice {
    /** The device current on each thread. */
    private static final ThreadLocal<ThreadBoundDevice> CURRENT = new ThreadLocal<>();

    private final Set<String> bindingThreads = ConcurrentHashMap.newKeySet();
    private final Device device = (Device) Proxy.newProxyInstance(Device.class.getClassLoader(),
            new Class<?>[] {Device.class}, (self, method, args) -> switch (method.getName()) {
                case "bindToCurrentThread" -> {
                    CURRENT.set(this);
                    bindingThreads.add(Thread.currentThread().getName());
                    yield null;
                }
                case "name", "toString" -> "thread-bound";
                case "isCuda" -> true;
                case "hashCode" -> System.identityHashCode(self);
                case "equals" -> self == args[0];
                default -> throw new UnsupportedOperationException(method.getName());
            });

    Device device() {
        return device;
    }

    /** Names of the threads that bound this device. */
    Set<String> bindingThreads() {
        return bindingThreads;
    }

    /** {@code engine}, failing every call that may run device work on a thread where this device is not current. */
    GenerationEngine engine(GenerationEngine engine) {
        return new GenerationEngine() {
            @Override
            public void submit(GenerationRequest request) {
                requireBound("submit");
                engine.submit(request);
            }

            @Override
            public void resume(GenerationRequest request, int[] generated) {
                requireBound("resume");
                engine.resume(request, generated);
            }

            @Override
            public StepResult step() {
                requireBound("step");
                return engine.step();
            }

            @Override
            public boolean hasWork() {
                return engine.hasWork();
            }

            @Override
            public void remove(String requestId) {
                requireBound("remove");
                engine.remove(requestId);
            }

            @Override
            public int waiting() {
                return engine.waiting();
            }

            @Override
            public EngineStats stats() {
                return engine.stats();
            }

            @Override
            public void close() {
                requireBound("close");
                engine.close();
            }
        };
    }

    private void requireBound(String call) {
        if (CURRENT.get() != this) {
            throw new IllegalStateException(call + " on thread '" + Thread.currentThread().getName()
                    + "', where the device is not bound");
        }
    }
}
