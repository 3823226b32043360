package org.mstar.jobs;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.HdrHistogram.Histogram;

/** The benchmark's result table: one row per run, latencies in milliseconds. */
final class DeliveryTable {
    private static final String FORMAT = "%-30s %8s %6s %15s %21s %15s %9s %6s%n";
    private final List<String> rows = new ArrayList<>();

    /** @param loadAverage the system's 1-minute load average when the run ended (the machine may be shared) */
    void add(String run, DeliveryTimeline.Summary s, double loadAverage) {
        rows.add(String.format(Locale.ROOT, FORMAT, run, s.requests(), s.tokens(),
                ms(s.firstToken(), 50) + " / " + ms(s.firstToken(), 95),
                ms(s.interArrival(), 50) + " / " + ms(s.interArrival(), 95) + " / " + ms(s.interArrival(), 100),
                ms(s.completion(), 50) + " / " + ms(s.completion(), 95),
                ms(s.engineTtft(), 50),
                String.format(Locale.ROOT, "%.2f", loadAverage)));
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT, FORMAT, "run", "requests", "tokens",
                "first token", "token inter-arrival", "completion", "engine", "load"));
        b.append(String.format(Locale.ROOT, FORMAT, "", "", "", "p50 / p95", "p50 / p95 / max", "p50 / p95",
                "TTFT p50", "1 min"));
        rows.forEach(b::append);
        return b.toString();
    }

    private static String ms(Histogram h, double percentile) {
        return h.getTotalCount() == 0 ? "-"
                : String.format(Locale.ROOT, "%.1f", h.getValueAtPercentile(percentile) / 1000.0);
    }
}
