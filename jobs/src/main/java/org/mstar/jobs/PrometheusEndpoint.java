package org.mstar.jobs;

import org.apache.flink.configuration.Configuration;

/**
 * Flink's Prometheus reporter, as {@code serve --metrics-port} sets it up for the local cluster: every metric of the
 * JobManager, the TaskManagers and the job (mstar's included) at {@code http://HOST:PORT/metrics}. A Flink cluster
 * takes the same keys in its own configuration (its distribution ships the reporter under {@code plugins/}).
 */
final class PrometheusEndpoint {
    /** The reporter's name in Flink's configuration keys. */
    static final String REPORTER = "prom";

    private static final String PREFIX = "metrics.reporter." + REPORTER + ".";

    private PrometheusEndpoint() {}

    /** Configures the reporter on {@code port} (Flink's reporter listens on every interface). */
    static void configure(Configuration conf, int port) {
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("--metrics-port is a TCP port, 1-65535, not " + port);
        }
        conf.setString(PREFIX + "factory.class", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory");
        conf.setString(PREFIX + "port", Integer.toString(port));
    }
}
