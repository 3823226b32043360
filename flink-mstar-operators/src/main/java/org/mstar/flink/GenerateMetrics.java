package org.mstar.flink;

import java.util.HashMap;
import java.util.Map;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.Histogram;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.metrics.DescriptiveStatisticsHistogram;
import org.mstar.engine.EngineStats;
import org.mstar.engine.RequestTimings;

/**
 * The operator's metrics, in group {@code mstar}, named like the serving engines users know. Gauges read a
 * snapshot the task thread takes after each step, never the engine itself (metric reporters run on other
 * threads; the engine is single-threaded).
 */
final class GenerateMetrics {
    /** Samples each latency histogram keeps. */
    private static final int HISTOGRAM_WINDOW = 2048;

    private final MetricGroup group;
    private final Counter tokensEmitted;
    private final Histogram timeToFirstToken;
    private final Histogram interTokenLatency;
    private final Histogram stepTokens;
    private final Map<Integer, Counter> errorsByCode = new HashMap<>();
    private volatile EngineStats stats = new EngineStats(0, 0, 0, 0, 0, 0, 0, 0);

    GenerateMetrics(MetricGroup operatorGroup) {
        group = operatorGroup.addGroup("mstar");
        group.gauge("requestsRunning", (Gauge<Integer>) () -> stats.running());
        group.gauge("requestsWaiting", (Gauge<Integer>) () -> stats.waiting());
        group.gauge("kvCacheUsagePercent", (Gauge<Double>) () -> stats.kvUsagePercent());
        group.gauge("prefixCacheHitTokens", (Gauge<Long>) () -> stats.prefixHitTokens());
        group.gauge("promptTokens", (Gauge<Long>) () -> stats.promptTokens());
        group.gauge("generationTokens", (Gauge<Long>) () -> stats.generatedTokens());
        group.gauge("preemptions", (Gauge<Long>) () -> stats.preemptions());
        group.gauge("adapterLoads", (Gauge<Long>) () -> stats.adapterLoads());
        group.gauge("adapterEvictions", (Gauge<Long>) () -> stats.adapterEvictions());
        tokensEmitted = group.counter("tokensEmitted");
        timeToFirstToken = group.histogram("timeToFirstTokenUs", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
        interTokenLatency = group.histogram("interTokenLatencyUs", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
        // a row samples one token per step: this counts the batch's sampling rows (not prefill chunks that sample none)
        stepTokens = group.histogram("stepTokens", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
    }

    void engineStats(EngineStats latest) {
        stats = latest;
    }

    /** The tokens one engine step sampled. */
    void tokens(int count) {
        tokensEmitted.inc(count);
        if (count > 0) {
            stepTokens.update(count);
        }
    }

    void finished(RequestTimings timings) {
        timeToFirstToken.update(timings.timeToFirstTokenNanos() / 1000);
        if (timings.meanInterTokenNanos() > 0) {
            interTokenLatency.update(timings.meanInterTokenNanos() / 1000);
        }
    }

    /** A request whose first token came {@code micros} after it arrived and which went on elsewhere (a hand-off). */
    void firstToken(long micros) {
        timeToFirstToken.update(micros);
    }

    /** Counts an error event, as {@code mstar.code.<code>.errors}. */
    void error(int code) {
        errorsByCode.computeIfAbsent(code, c -> group.addGroup("code", Integer.toString(c)).counter("errors")).inc();
    }
}
