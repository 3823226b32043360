package org.mstar.device.cuda.harness;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * A sampling profiler of one thread, for host-bound loops on a machine without profilers: a daemon
 * thread reads the target's stack at a fixed interval and counts, per method, the samples whose stack
 * holds it (inclusive) and those where it is on top (self). Stacks are taken at safepoints, so a
 * method that never reaches one is charged to its caller; native calls (JNI into the driver) show as
 * themselves.
 */
final class HostSampler implements AutoCloseable {
    private final Thread target;
    private final Thread sampler;
    private final Map<String, Integer> inclusive = new HashMap<>();
    private final Map<String, Integer> self = new HashMap<>();
    private volatile boolean running = true;
    private int samples;

    HostSampler(Thread target, long intervalMicros) {
        this.target = target;
        this.sampler = new Thread(() -> {
            while (running) {
                sample();
                LockSupport.parkNanos(intervalMicros * 1000);
            }
        }, "host-sampler");
        sampler.setDaemon(true);
        sampler.start();
    }

    private void sample() {
        StackTraceElement[] stack = target.getStackTrace();
        if (stack.length == 0) {
            return;
        }
        samples++;
        self.merge(method(stack[0]), 1, Integer::sum);
        Set<String> seen = new HashSet<>();
        for (StackTraceElement e : stack) {
            String m = method(e);
            if (seen.add(m)) {
                inclusive.merge(m, 1, Integer::sum);
            }
        }
    }

    private static String method(StackTraceElement e) {
        String cls = e.getClassName();
        return cls.substring(cls.lastIndexOf('.') + 1) + "." + e.getMethodName();
    }

    /** Stops sampling; the tables are complete after this. */
    @Override
    public void close() {
        running = false;
        try {
            sampler.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The {@code top} methods by inclusive and by self share of the samples, as one markdown table. */
    String table(int top) {
        List<Map.Entry<String, Integer>> inc = sorted(inclusive, top);
        List<Map.Entry<String, Integer>> own = sorted(self, top);
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%d samples%n%n", samples));
        sb.append("| inclusive % | method | self % | method |\n|---|---|---|---|\n");
        for (int i = 0; i < Math.max(inc.size(), own.size()); i++) {
            sb.append(cell(inc, i)).append(cell(own, i)).append("|\n");
        }
        return sb.toString();
    }

    private String cell(List<Map.Entry<String, Integer>> list, int i) {
        if (i >= list.size()) {
            return "| | ";
        }
        Map.Entry<String, Integer> e = list.get(i);
        return String.format(Locale.ROOT, "| %.1f | %s ", 100.0 * e.getValue() / samples, e.getKey());
    }

    private static List<Map.Entry<String, Integer>> sorted(Map<String, Integer> counts, int top) {
        return counts.entrySet().stream().sorted(Map.Entry.<String, Integer>comparingByValue().reversed()).limit(top)
                .toList();
    }
}
