package org.mstar.jobs;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Histogram;
import org.apache.flink.metrics.HistogramStatistics;
import org.apache.flink.metrics.Metric;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;

/**
 * A metric reporter that keeps the operators' metrics of the benchmark's in-process jobs where the benchmark reads
 * them, by operator name and metric name ({@code "mstar decode/handoffLatencyMs"}). The jobs run in this process
 * (MiniCluster), so the reporter and the benchmark share this class's map. Turned on by {@link #configure}.
 */
public final class BenchMetrics implements MetricReporter {
    /** The reporter's name in Flink's configuration. */
    static final String NAME = "mstarbench";

    private static final Map<String, Metric> METRICS = new ConcurrentHashMap<>();

    /** Adds this reporter to a job's configuration. */
    static void configure(org.apache.flink.configuration.Configuration conf) {
        conf.setString("metrics.reporter." + NAME + ".factory.class", Factory.class.getName());
    }

    /** Forgets the metrics of earlier jobs. */
    static void reset() {
        METRICS.clear();
    }

    /** @return the counter's count, or 0 when no operator named so registered it */
    static long count(String operator, String name) {
        return METRICS.get(operator + "/" + name) instanceof Counter c ? c.getCount() : 0;
    }

    /** @return the histogram's statistics, or null when no operator named so registered it */
    static HistogramStatistics histogram(String operator, String name) {
        return METRICS.get(operator + "/" + name) instanceof Histogram h ? h.getStatistics() : null;
    }

    @Override
    public void open(MetricConfig config) {}

    @Override
    public void close() {}

    @Override
    public void notifyOfAddedMetric(Metric metric, String metricName, MetricGroup group) {
        String operator = group.getAllVariables().get("<operator_name>");
        if (operator != null) {
            METRICS.put(operator + "/" + metricName, metric);
        }
    }

    /** Kept after the job ends, so the benchmark can read them after cancelling it. */
    @Override
    public void notifyOfRemovedMetric(Metric metric, String metricName, MetricGroup group) {}

    /** Found by Flink through {@code META-INF/services}. */
    public static final class Factory implements MetricReporterFactory {
        @Override
        public MetricReporter createMetricReporter(Properties properties) {
            return new BenchMetrics();
        }
    }
}
