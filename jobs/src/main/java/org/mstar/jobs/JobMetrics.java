package org.mstar.jobs;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The generate task's and the sink writer's metrics at one moment, through the job's REST API: the generate
 * operator's {@code mstar} time metrics (steps, engine and emit time, time between steps, barriers, the busy period's
 * timestamps), the writer's flushes, and Flink's busy, back-pressured and idle time of both tasks. Keys are the
 * metric names without their operator's prefix.
 */
record JobMetrics(Map<String, Double> generate, Map<String, Double> sink) {
    static final List<String> TASK_TIME = List.of("accumulateBusyTimeMs", "accumulateBackPressuredTimeMs",
            "accumulateIdleTimeMs");
    static final List<String> GENERATE = List.of("tokensEmitted", "steps", "engineStepMicros", "emitMicros",
            "betweenStepsMicros", "longestBetweenStepsMicros", "barriers", "preBarrierMicros", "busySinceMillis",
            "firstStepMillis", "lastArrivalMillis", "lastTokenMillis");
    static final List<String> SINK = List.of("flushes", "flushMicros");

    /**
     * Where the metrics are: the vertex (task) that runs the generate operator and the one that runs the sink's
     * writer (the same where they are chained), with their names and the prefix of their operators' metrics.
     */
    record Tasks(String generateTask, String generateVertex, String generatePrefix, String sinkTask, String sinkVertex,
                 String sinkPrefix) {
        static Tasks find(JobRest rest, Map<String, String> vertices) throws IOException, InterruptedException {
            String generate = named(vertices, "mstar generate");
            String sink = named(vertices, "Writer");
            return new Tasks(generate, vertices.get(generate), prefix(rest, vertices.get(generate), "steps"),
                    sink, vertices.get(sink), prefix(rest, vertices.get(sink), "flushMicros"));
        }

        private static String named(Map<String, String> vertices, String part) {
            return vertices.keySet().stream().filter(n -> n.contains(part)).findFirst().orElseThrow(() ->
                    new IllegalStateException("no task of the job is named like '" + part + "': " + vertices.keySet()));
        }

        /**
         * What precedes {@code name} in the id of the operator's {@code mstar} metric ("mstar_generate.mstar." in
         * "mstar_generate.mstar.steps").
         */
        private static String prefix(JobRest rest, String vertex, String name) throws IOException, InterruptedException {
            return JobRest.awaitMetrics(() -> rest.metricIds(vertex).stream().filter(id -> id.endsWith(".mstar." + name))
                    .findFirst().map(id -> id.substring(0, id.length() - name.length())), "metric mstar." + name);
        }
    }

    /**
     * Reads the metrics once the generate operator's {@code tokensEmitted} is at least {@code tokensEmitted}: the
     * first answer that counts every token of the row was collected after the row's last step.
     */
    static JobMetrics read(JobRest rest, Tasks tasks, long tokensEmitted) throws IOException, InterruptedException {
        Map<String, Double> generate = JobRest.awaitMetrics(() -> {
            Map<String, Double> g = read(rest, tasks.generateVertex(), tasks.generatePrefix(), GENERATE);
            return Optional.of(g).filter(m -> m.getOrDefault("tokensEmitted", -1.0) >= tokensEmitted);
        }, tokensEmitted + " tokens emitted");
        return new JobMetrics(generate, read(rest, tasks.sinkVertex(), tasks.sinkPrefix(), SINK));
    }

    private static Map<String, Double> read(JobRest rest, String vertex, String prefix, List<String> operatorMetrics)
            throws IOException, InterruptedException {
        List<String> ids = new ArrayList<>(TASK_TIME);
        operatorMetrics.forEach(m -> ids.add(prefix + m));
        Map<String, Double> values = new LinkedHashMap<>();
        rest.metrics(vertex, ids).forEach((id, v) -> values.put(id.startsWith(prefix) ? id.substring(prefix.length())
                : id, v));
        return values;
    }

    /** How much metric {@code name} of a task grew from {@code before} to {@code after} (0 where absent). */
    static double delta(Map<String, Double> before, Map<String, Double> after, String name) {
        return after.getOrDefault(name, 0.0) - before.getOrDefault(name, 0.0);
    }
}
