package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.mstar.engine.GenerationEngine;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/**
 * The thread rule: Flink calls the operator from changing threads (open, records, timers, snapshot, close; a new
 * task thread after a restore), and the engine's device is made current on whichever thread calls, through its
 * {@link DeviceTurn}. The device here, like a CUDA context, is current per thread, and its engine refuses work
 * on a thread where it is not.
 */
class DeviceThreadRuleTest {
    private static final int MAX_PARALLELISM = 8;

    /** Static: the engine factory travels inside the operator factory as a serializable method reference. */
    private static final ThreadBoundDevice DEVICE = new ThreadBoundDevice();
    private static final DeviceTurn TURN = new DeviceTurn(DEVICE.device());

    @Test
    void anEngineCalledWithoutTheTurnIsRefused() {
        GenerationEngine unguarded = DEVICE.engine(new FakeEngine(2, FakeEngineFactory.CONTEXT_LENGTH, 0));
        GenerateRequest request = TestRequests.request("u", 1);
        assertThatThrownBy(() -> onThread("unbound", () -> unguarded.submit(
                TestRequests.converter().convert(request))))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("'unbound'");
    }

    @Test
    void everyOperatorCallMakesTheDeviceCurrentOnItsOwnThread() throws Exception {
        List<GenerateRequest> requests = TestRequests.requests("t", 6);
        TestRequests.Collected committed = new TestRequests.Collected();
        var first = harness();
        onThread("task-open", () -> {
            EngineHarness.open(first);
            for (GenerateRequest r : requests) {
                first.processElement(r, 0);
            }
        });
        OperatorSubtaskState snapshot = onThread("task-timers", () -> {
            for (int i = 0; i < 3; i++) {
                first.setProcessingTime(first.getProcessingTime() + 1);
            }
            first.prepareSnapshotPreBarrier(1);
            OperatorSubtaskState s = first.snapshot(1, 1);
            committed.addAll(new ArrayList<>(first.extractOutputValues()));
            return s;
        });
        onThread("task-close", first::close);

        var restored = harness();
        onThread("restored-task", () -> {
            restored.initializeState(snapshot);
            EngineHarness.open(restored);
            while (restored.getProcessingTimeService().getNumActiveTimers() > 0) {
                restored.setProcessingTime(restored.getProcessingTime() + 1);
            }
            committed.addAll(new ArrayList<>(restored.extractOutputValues()));
        });
        onThread("restored-close", restored::close);

        committed.assertComplete(requests);
        assertThat(DEVICE.bindingThreads())
                .contains("task-open", "task-timers", "task-close", "restored-task", "restored-close");
    }

    private static GenerationEngine newEngine(String deviceName, int subtask) {
        return TURN.guard(TURN.call(() -> DEVICE.engine(new FakeEngine(2, FakeEngineFactory.CONTEXT_LENGTH, 0))));
    }

    private static KeyedOneInputStreamOperatorTestHarness<String, GenerateRequest, Response> harness()
            throws Exception {
        var factory = new GenerateOperatorFactory(DeviceThreadRuleTest::newEngine,
                GenerateSettings.from(new Configuration()));
        var harness = new KeyedOneInputStreamOperatorTestHarness<>(
                factory, GenerateRequest::getRequestId, Types.STRING, MAX_PARALLELISM, 1, 0);
        harness.setStateBackend(new EmbeddedRocksDBStateBackend());
        return harness;
    }

    private interface Work<T> {
        T call() throws Exception;
    }

    private interface VoidWork {
        void run() throws Exception;
    }

    private static void onThread(String name, VoidWork work) throws Exception {
        onThread(name, () -> {
            work.run();
            return null;
        });
    }

    /** Runs {@code work} on a new thread named {@code name} and waits for it. */
    private static <T> T onThread(String name, Work<T> work) throws Exception {
        FutureTask<T> task = new FutureTask<>(work::call);
        new Thread(task, name).start();
        try {
            return task.get();
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }
}
