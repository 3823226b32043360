package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import org.apache.flink.metrics.testutils.MetricListener;
import org.junit.jupiter.api.Test;

class TaskTimeMetricsTest {
    private final MetricListener listener = new MetricListener();
    private long nanos;
    private long millis = 1_000;
    private final TaskTimeMetrics metrics = new TaskTimeMetrics(listener.getMetricGroup(), () -> nanos, () -> millis);

    @Test
    void splitsTheTimeWithWorkPendingIntoEngineStepsEmittingAndBetweenSteps() throws Exception {
        metrics.arrived(true);
        millis = 1_003;
        metrics.arrived(false);
        millis = 1_005;
        step(0, 30_000_000, 31_000_000, 8, true);
        // a barrier between the steps: 4 ms saving state, within the 10 ms between them
        nanos = 33_000_000;
        metrics.atBarrier(() -> nanos = 37_000_000);
        step(41_000_000, 71_000_000, 71_500_000, 8, true);
        millis = 1_080;
        // the last step: nothing left, so the time after it is idle, not between steps
        step(73_000_000, 100_000_000, 101_000_000, 8, false);
        millis = 2_000;
        nanos = 900_000_000;
        metrics.arrived(true);
        // a new burst: its longest gap starts again, its first step is not yet
        assertThat(counter("steps")).isEqualTo(3);
        assertThat(counter("engineStepMicros")).isEqualTo(30_000 + 30_000 + 27_000);
        assertThat(counter("emitMicros")).isEqualTo(1_000 + 500 + 1_000);
        assertThat(counter("betweenStepsMicros")).isEqualTo(10_000 + 1_500);
        assertThat(counter("barriers")).isEqualTo(1);
        assertThat(counter("preBarrierMicros")).isEqualTo(4_000);
        assertThat(gauge("busySinceMillis")).isEqualTo(2_000);
        assertThat(gauge("firstStepMillis")).isEqualTo(1_005);
        assertThat(gauge("lastArrivalMillis")).isEqualTo(2_000);
        assertThat(gauge("lastTokenMillis")).isEqualTo(1_080);
        assertThat(gauge("longestBetweenStepsMicros")).isZero();
    }

    @Test
    void theLongestGapIsOfTheCurrentBusyPeriodAndAStepWithoutTokensLeavesTheLastTokenTime() {
        metrics.arrived(true);
        step(0, 10_000_000, 10_000_000, 4, true);
        millis = 1_500;
        step(60_000_000, 70_000_000, 70_000_000, 0, true);
        assertThat(gauge("longestBetweenStepsMicros")).isEqualTo(50_000);
        assertThat(gauge("lastTokenMillis")).isEqualTo(1_000);
    }

    private void step(long start, long engineDone, long end, int tokens, boolean workLeft) {
        nanos = start;
        metrics.stepStarted();
        nanos = engineDone;
        metrics.engineStepped();
        nanos = end;
        metrics.stepEnded(tokens, workLeft);
    }

    private long counter(String name) {
        return listener.getCounter(name).orElseThrow().getCount();
    }

    private long gauge(String name) {
        return listener.<Long>getGauge(name).orElseThrow().getValue();
    }
}
