package org.mstar.jobs.chaos;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.flink.configuration.Configuration;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.UninterruptedRun;
import org.mstar.jobs.ModelSource;
import org.mstar.schemas.GenerateRequest;

/**
 * A chaos run (issue #36): {@code mstar kafka} and {@code mstar serve --random}, the latter as one child process
 * ({@code --target serve}) or submitted to a session cluster of {@code scripts/cluster/} ({@code --target cluster}),
 * under a steady open-loop load and a seeded schedule of faults, then {@link ExactlyOnceChecker} on everything a
 * read_committed consumer saw. Exit code 0 when nothing was violated, 1 otherwise, 2 when the run itself failed. Options (all
 * {@code --name value}): {@code --dir} (new folder for logs, broker data and state; required), {@code --seconds}:
 * the least time of load (300; the load goes on until every fault is applied), {@code --rate} requests per second
 * (1), {@code --seed} (1), {@code --faults-each} of each kind (5), {@code --max-gap-seconds} between one fault's
 * recovery and the next (4), {@code --port} of the broker (19092), {@code --tail-seconds}: how long after the last
 * fault was over (or its send, if later) a request may take to end (180), {@code --fault-minutes}: after how long
 * no further fault begins (no limit), {@code --target} (serve), {@code --kinds}: the fault kinds, comma-separated
 * (every kind the target takes). The cluster
 * target needs the shaded job jar ({@code mvn -pl jobs -am package -DskipTests}) of the checkout that system property
 * {@code mstar.root} names.
 */
public final class ChaosRun {
    private static final int MAX_BATCH_ROWS = 8;
    /**
     * Serve's Kafka clients give up after seconds rather than Kafka's minutes, as a deployment that wants a failed
     * broker noticed and failed over from soon would set them: a {@code BROKER_OUTAGE} of 15 to 25 s then outlasts
     * them and the job restores from its checkpoint, where Kafka's defaults (2 min to deliver) would ride it out.
     */
    private static final List<String> KAFKA_TIMEOUTS = List.of("-Dmstar.kafka.request.timeout.ms=5000",
            "-Dmstar.kafka.delivery.timeout.ms=10000", "-Dmstar.kafka.max.block.ms=5000",
            "-Dmstar.kafka.default.api.timeout.ms=5000");
    /**
     * Flink's exponential restart delay grows to a minute and shrinks back only after an hour without failure; a
     * chaos run fails the job every minute or so, and at a minute a restart the hour would hold few faults.
     */
    private static final String MAX_RESTART_DELAY = "-Drestart-strategy.exponential-delay.max-backoff=10 s";

    private ChaosRun() {}

    public static void main(String[] args) {
        try {
            System.exit(run(options(args)) ? 0 : 1);
        } catch (Exception e) {
            e.printStackTrace();
            // Ends the load's and the reader's threads too: left running, they would feed the next run's broker.
            System.exit(2);
        }
    }

    /**
     * @param o the options by name, without their leading dashes
     * @return whether the checker found nothing wrong
     */
    static boolean run(Map<String, String> o) throws Exception {
        Path dir = Path.of(required(o, "dir"));
        Duration load = Duration.ofSeconds(Long.parseLong(o.getOrDefault("seconds", "300")));
        double rate = Double.parseDouble(o.getOrDefault("rate", "1"));
        long seed = Long.parseLong(o.getOrDefault("seed", "1"));
        int faultsEach = Integer.parseInt(o.getOrDefault("faults-each", "5"));
        long maxGapMillis = Long.parseLong(o.getOrDefault("max-gap-seconds", "4")) * 1000;
        int port = Integer.parseInt(o.getOrDefault("port", "19092"));
        Duration tail = Duration.ofSeconds(Long.parseLong(o.getOrDefault("tail-seconds", "180")));
        Duration faultTime = o.containsKey("fault-minutes")
                ? Duration.ofMinutes(Long.parseLong(o.get("fault-minutes"))) : Duration.ofNanos(Long.MAX_VALUE);
        if (Files.exists(dir)) {
            throw new IllegalArgumentException("--dir " + dir + " exists: a chaos run starts from nothing");
        }
        Files.createDirectories(dir);

        Timeline timeline = new Timeline();
        List<String> serveOptions = new ArrayList<>(List.of("--checkpoint-interval", "1",
                "-D" + LlamaEngineOptions.MAX_BATCH_ROWS.key() + "=" + MAX_BATCH_ROWS, MAX_RESTART_DELAY));
        serveOptions.addAll(KAFKA_TIMEOUTS);
        ChaosBroker broker = new ChaosBroker(dir, port);
        ChaosJob job = switch (o.getOrDefault("target", "serve")) {
            case "serve" -> new ServeUnderChaos(dir, broker.bootstrapServers(), serveOptions, timeline);
            case "cluster" -> new ClusterUnderChaos(Path.of(System.getProperty("mstar.root", ".")).toAbsolutePath(),
                    dir, broker.bootstrapServers(), serveOptions, timeline);
            default -> throw new IllegalArgumentException("--target is serve or cluster, not " + o.get("target"));
        };
        Optional<StateDisk> disk = StateDisk.mount(job.stateDir());
        Set<FaultSchedule.Kind> takes = EnumSet.of(FaultSchedule.Kind.BROKER_KILL, FaultSchedule.Kind.BROKER_FREEZE,
                FaultSchedule.Kind.BROKER_RESTART, FaultSchedule.Kind.BROKER_OUTAGE);
        takes.addAll(job.kinds());
        disk.ifPresent(d -> takes.add(FaultSchedule.Kind.DISK_FULL));
        Set<FaultSchedule.Kind> kinds = FaultSchedule.chosen(o.getOrDefault("kinds", ""), takes);
        List<FaultSchedule.Fault> schedule = FaultSchedule.of(seed, kinds, faultsEach, 1_000, maxGapMillis);
        OpenLoopLoad sender;
        CommittedResponses responses;
        FaultInjector injector;
        try (broker; job) {
            broker.start();
            job.start();
            timeline.add(schedule.size() + " faults scheduled (" + kinds + "), load for at least " + load + " at "
                    + rate + "/s");
            responses = new CommittedResponses(broker.bootstrapServers(), "responses");
            Thread reader = new Thread(responses, "chaos-reader");
            reader.start();
            sender = new OpenLoopLoad(seed, rate, broker.bootstrapServers(), "requests");
            Thread sending = new Thread(sender, "chaos-load");
            long loadEnd = System.nanoTime() + load.toNanos();
            sending.start();
            injector = new FaultInjector(broker, job, disk, responses, () -> !open(sender, responses).isEmpty(),
                    Duration.ofMinutes(3), timeline);
            injector.apply(schedule, faultTime);
            TimeUnit.NANOSECONDS.sleep(Math.max(0, loadEnd - System.nanoTime())); // the load's stated least length
            sender.stop();
            sending.join();
            timeline.add("the load ended: " + sender.sent.size() + " requests acknowledged, "
                    + sender.unacknowledged.size() + " not");
            boolean allEnded = awaitAllEnded(sender, responses, tail);
            timeline.add(allEnded ? "every request ended" : open(sender, responses).size() + " requests still open "
                    + tail + " after the last fault and send");
            responses.stop();
            reader.join();
        } finally {
            if (disk.isPresent()) {
                disk.get().close();
            }
        }
        List<GenerateRequest> requests = sender.sent.stream().map(OpenLoopLoad.SentRequest::request).toList();
        ExactlyOnceChecker checker = new ExactlyOnceChecker(timeline, injector.lastFaultOverMillis, tail);
        checker.check(sender.sent, sender.unacknowledged, responses.seen, reference(requests));
        report(checker, sender, responses, injector, job, seed);
        return checker.violations.isEmpty();
    }

    /** The tokens the engine generates for the requests in one uninterrupted run, as serve converts them. */
    private static Map<String, List<Integer>> reference(List<GenerateRequest> requests) {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, ModelSource.resolve(null, "", new PrintWriter(System.err)).toString());
        conf.set(LlamaEngineOptions.MAX_BATCH_ROWS, MAX_BATCH_ROWS);
        try (GenerationEngine engine = new LlamaEngineFactory(conf).create("cpu", 0)) {
            return UninterruptedRun.tokens(requests, engine, conf);
        } catch (Exception e) {
            throw new IllegalStateException("the reference run failed", e);
        }
    }

    private static Set<String> open(OpenLoopLoad sender, CommittedResponses responses) {
        Set<String> open = new HashSet<>();
        sender.sent.forEach(r -> open.add(r.request().getRequestId()));
        responses.seen.stream().filter(CommittedResponses.Seen::ends).forEach(s -> open.remove(s.requestId()));
        return open;
    }

    private static boolean awaitAllEnded(OpenLoopLoad sender, CommittedResponses responses, Duration tail)
            throws InterruptedException {
        long deadline = System.nanoTime() + tail.toNanos();
        while (!open(sender, responses).isEmpty()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            TimeUnit.MILLISECONDS.sleep(200); // poll interval of a condition with a deadline
        }
        return true;
    }

    private static void report(ExactlyOnceChecker checker, OpenLoopLoad sender, CommittedResponses responses,
                               FaultInjector injector, ChaosJob job, long seed) throws Exception {
        System.out.println("==== chaos run summary (seed " + seed + ")");
        System.out.println("faults applied: " + injector.applied + "; without a response committed within the"
                + " recovery bound after: " + injector.unrecovered + "; after which the job had failed over: "
                + injector.failedOver + "; " + job.summary());
        System.out.println("requests acknowledged: " + sender.sent.size() + "; not acknowledged by the broker: "
                + sender.unacknowledged.size());
        System.out.println("read: " + responses.seen.size() + " records; " + checker.results + " results, "
                + checker.tokens + " token events; error events by code: " + checker.errorsByCode);
        List<String> alarming = job.alarmingLogLines();
        System.out.println("log lines about data loss: " + alarming.size());
        alarming.stream().limit(5).forEach(l -> System.out.println("  " + l));
        System.out.println("violations: " + checker.violations.size());
        checker.violations.stream().limit(20).forEach(v -> System.out.println("---- " + v));
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + args[i]);
            }
            out.put(args[i].substring(2), args[i + 1]);
        }
        return out;
    }

    private static String required(Map<String, String> o, String name) {
        String v = o.get(name);
        if (v == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }
}
