package org.mstar.jobs;

import java.util.Arrays;
import java.util.Locale;
import org.HdrHistogram.Histogram;

/**
 * One row of the serving benchmark: a load served by one side (the bare engine or the Flink job), in one mode, with
 * what users compare serving engines by. Percentiles are nearest-rank over requests (TTFT, TPOT) or over every
 * token gap (ITL). Written to the run's JSON as is.
 *
 * @param side {@code engine} or {@code flink}
 * @param mode {@code offline} (every request at once), {@code rate} (Poisson arrivals) or {@code concurrency}
 * @param rate requests per second of a {@code rate} run, else 0
 * @param concurrency requests kept in flight by a {@code concurrency} run, else 0
 * @param goodput requests per second that met both SLOs
 * @param ceilingOutputTokS what the device could do with this load at the engine's size (0 where not computed)
 */
record ServingResult(String load, String side, String mode, double rate, int concurrency, int requests,
                     long promptTokens, long outputTokens, double seconds, double outputTokS, double totalTokS,
                     double requestsPerS, Percentiles ttftMs, Percentiles tpotMs, Percentiles itlMs, double goodput,
                     double ceilingOutputTokS) {
    /** p50, p90 and p99. */
    record Percentiles(double p50, double p90, double p99) {
        static Percentiles of(double[] values) {
            double[] v = Arrays.stream(values).filter(x -> !Double.isNaN(x) && x >= 0).sorted().toArray();
            return new Percentiles(rank(v, 50), rank(v, 90), rank(v, 99));
        }

        static Percentiles of(Histogram micros) {
            return micros.getTotalCount() == 0 ? new Percentiles(Double.NaN, Double.NaN, Double.NaN)
                    : new Percentiles(micros.getValueAtPercentile(50) / 1e3, micros.getValueAtPercentile(90) / 1e3,
                            micros.getValueAtPercentile(99) / 1e3);
        }

        private static double rank(double[] sorted, double p) {
            if (sorted.length == 0) {
                return Double.NaN;
            }
            int r = (int) Math.ceil(p / 100 * sorted.length);
            return sorted[Math.max(0, r - 1)];
        }

        /** p50/p90/p99, or "-" where nothing was measured (an sql row's answers arrive whole: no TPOT, no ITL). */
        String text() {
            return Double.isNaN(p50) ? "-" : String.format(Locale.ROOT, "%.0f/%.0f/%.0f", p50, p90, p99);
        }
    }

    /** The service level a request must meet to count in the goodput. */
    record Slo(double ttftMs, double tpotMs) {}

    static ServingResult of(ServingLoad load, String side, String mode, double rate, int concurrency,
            ServingTrace trace, Slo slo, double ceiling) {
        double s = trace.seconds();
        double[] ttft = trace.ttftMillis();
        double[] tpot = trace.tpotMillis();
        int good = 0;
        for (int i = 0; i < ttft.length; i++) {
            if (ttft[i] >= 0 && ttft[i] <= slo.ttftMs() && !(tpot[i] > slo.tpotMs())) {
                good++;
            }
        }
        long out = trace.tokens();
        return new ServingResult(load.name(), side, mode, rate, concurrency, trace.requests(), load.promptTokens(),
                out, s, out / s, (out + load.promptTokens()) / s, trace.requests() / s, Percentiles.of(ttft),
                Percentiles.of(tpot), Percentiles.of(trace.itlMicros()), good / s, ceiling);
    }

    /** This row's output tok/s over its ceiling; NaN where none was computed. */
    double ofCeiling() {
        return ceilingOutputTokS > 0 ? outputTokS / ceilingOutputTokS : Double.NaN;
    }

    static final String HEADER = "| load | side | mode | requests | output tok/s | total tok/s | ceiling tok/s"
            + " | of ceiling | TTFT ms p50/p90/p99 | TPOT ms p50/p90/p99 | ITL ms p50/p90/p99 | goodput req/s |\n"
            + "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

    String row() {
        String m = switch (mode) {
            case "rate" -> String.format(Locale.ROOT, "%.2f req/s", rate);
            case "concurrency" -> "concurrency " + concurrency;
            default -> mode;
        };
        return String.format(Locale.ROOT, "| %s | %s | %s | %d | %.0f | %.0f | %s | %s | %s | %s | %s | %.2f |%n",
                load, side, m, requests, outputTokS, totalTokS,
                ceilingOutputTokS > 0 ? String.format(Locale.ROOT, "%.0f", ceilingOutputTokS) : "-",
                ceilingOutputTokS > 0 ? String.format(Locale.ROOT, "%.0f %%", 100 * ofCeiling()) : "-",
                ttftMs.text(), tpotMs.text(), itlMs.text(), goodput);
    }
}
