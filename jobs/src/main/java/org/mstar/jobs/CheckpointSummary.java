package org.mstar.jobs;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToLongFunction;

/**
 * The checkpoints of one benchmark row: how many completed (and of those, went unaligned) and failed, their duration
 * from trigger to the last acknowledgement, and per task the median and largest of its synchronous and asynchronous
 * snapshot parts, barrier alignment and start delay. Medians are nearest-rank over the row's checkpoints.
 */
record CheckpointSummary(int completed, int unaligned, int failed, Spread endToEndMs, Map<String, TaskSpread> tasks) {
    /** Median and largest, ms. */
    record Spread(double p50, double max) {
        static Spread of(List<CheckpointStats> checkpoints, ToLongFunction<CheckpointStats> value) {
            List<Double> values = checkpoints.stream().map(c -> (double) value.applyAsLong(c)).toList();
            return new Spread(PipelineBench.percentile(values, 50),
                    values.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN));
        }

        String text() {
            return String.format(Locale.ROOT, "%.0f/%.0f", p50, max);
        }
    }

    /** A task's times over the row's checkpoints. */
    record TaskSpread(Spread syncMs, Spread asyncMs, Spread alignmentMs, Spread startDelayMs) {}

    static CheckpointSummary of(CheckpointStats.Window window) {
        List<CheckpointStats> done = window.completed();
        Map<String, TaskSpread> tasks = new LinkedHashMap<>();
        done.stream().flatMap(c -> c.tasks().keySet().stream()).distinct().forEach(task -> {
            List<CheckpointStats> with = done.stream().filter(c -> c.tasks().containsKey(task)).toList();
            tasks.put(task, new TaskSpread(
                    Spread.of(with, c -> c.tasks().get(task).syncMs()),
                    Spread.of(with, c -> c.tasks().get(task).asyncMs()),
                    Spread.of(with, c -> c.tasks().get(task).alignmentMs()),
                    Spread.of(with, c -> c.tasks().get(task).startDelayMs())));
        });
        return new CheckpointSummary(done.size(), (int) done.stream().filter(CheckpointStats::unaligned).count(),
                window.failed(), Spread.of(done, CheckpointStats::endToEndMs), tasks);
    }

    /** Lines for stderr, each indented by {@code indent}. */
    String text(String indent) {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT,
                "%scheckpoints: %d completed (%d unaligned), %d failed; trigger to last ack ms p50/max %s%n",
                indent, completed, unaligned, failed, endToEndMs.text()));
        tasks.forEach((task, t) -> b.append(String.format(Locale.ROOT,
                "%s  %s: sync %s, async %s, alignment %s, start delay %s ms p50/max%n", indent, task,
                t.syncMs().text(), t.asyncMs().text(), t.alignmentMs().text(), t.startDelayMs().text())));
        return b.toString();
    }
}
