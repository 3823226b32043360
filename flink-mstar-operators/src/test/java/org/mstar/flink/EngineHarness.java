package org.mstar.flink;

import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;

/** Test harnesses of the engine operators, whose engines are built off the task thread ({@link EngineStart}). */
final class EngineHarness {
    private EngineHarness() {}

    /**
     * Opens {@code harness} and takes the engine up on the calling thread, waiting for its build, as a task does
     * at the mail the build posts or at the first record.
     */
    static void open(AbstractStreamOperatorTestHarness<?> harness) throws Exception {
        harness.open();
        ((EngineOperator<?>) harness.getOperator()).startedEngine();
    }
}
