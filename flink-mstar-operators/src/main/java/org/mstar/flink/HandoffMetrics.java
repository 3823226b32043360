package org.mstar.flink;

import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Histogram;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.metrics.DescriptiveStatisticsHistogram;

/**
 * Hand-off metrics of a prefill or decode operator, in group {@code mstar}: hand-offs, records and KV bytes moved,
 * and (decode side) the bytes of each hand-off and the time from its publication on the prefill side to its import
 * here, which takes in device-to-host copy, serialisation, Flink's network and reassembly.
 */
final class HandoffMetrics {
    private static final int HISTOGRAM_WINDOW = 2048;

    private final Counter handoffs;
    private final Counter records;
    private final Counter bytes;
    private final Histogram handoffBytes;
    private final Histogram latency;

    HandoffMetrics(MetricGroup operatorGroup) {
        MetricGroup group = operatorGroup.addGroup("mstar");
        handoffs = group.counter("handoffs");
        records = group.counter("handoffRecords");
        bytes = group.counter("handoffBytes");
        handoffBytes = group.histogram("handoffSizeBytes", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
        latency = group.histogram("handoffLatencyMs", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
    }

    /** A record sent or received. */
    void record(int dataBytes) {
        records.inc();
        bytes.inc(dataBytes);
    }

    /** A whole hand-off sent (latency unknown, -1) or imported. */
    void handoff(long totalBytes, long latencyMillis) {
        handoffs.inc();
        handoffBytes.update(totalBytes);
        if (latencyMillis >= 0) {
            latency.update(latencyMillis);
        }
    }
}
