package org.mstar.engine;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.resources.SamplingReqConfig;

/**
 * The engine's step loop around a {@link Scheduler} without a model: a page pool counted in pages, admission
 * that refuses a step needing more pages than are free, preemption by recompute (the victim's pages freed,
 * its KV to be recomputed), and a clock that advances by a cost per step. Token {@code i} of a request is a
 * function of (id, i), so a lost or repeated token shows in its output.
 */
final class SchedulerSimulation {
    final Scheduler scheduler;
    final int pageSize;
    final int totalPages;
    final long stepFixedNanos;
    final long perTokenNanos;
    final Map<String, LiveRequest> live = new LinkedHashMap<>();
    final Map<String, List<Integer>> outputs = new HashMap<>();
    /** Step number at which each request first got a row. */
    final Map<String, Integer> firstRow = new HashMap<>();
    final Map<String, Integer> finishedAt = new HashMap<>();
    final List<String> finishOrder = new ArrayList<>();
    final List<List<BatchRow>> steps = new ArrayList<>();
    /** Simulated duration of each step that carried decodes, with its prefill tokens. */
    final List<long[]> decodeSteps = new ArrayList<>();
    long now;
    int preemptions;
    private final int maxRows;
    private final int tokenBudget;

    SchedulerSimulation(int maxRows, int tokenBudget, int pageSize, int totalPages, SchedulerOptions options,
                        long stepFixedNanos, long perTokenNanos) {
        this.maxRows = maxRows;
        this.tokenBudget = tokenBudget;
        this.pageSize = pageSize;
        this.totalPages = totalPages;
        this.stepFixedNanos = stepFixedNanos;
        this.perTokenNanos = perTokenNanos;
        this.scheduler = new Scheduler(maxRows, tokenBudget, pageSize, options);
    }

    static GenerationRequest request(String id, int promptLength, int maxTokens, int priority) {
        int[] prompt = new int[promptLength];
        for (int i = 0; i < promptLength; i++) {
            prompt[i] = 2 + Math.floorMod((id.hashCode() * 31) + i, 300);
        }
        return GenerationRequest.builder(id).promptTokenIds(prompt).sampling(SamplingReqConfig.DEFAULTS)
                .maxTokens(maxTokens).ignoreEos(true).priority(priority).build();
    }

    static int tokenOf(String id, int index) {
        return 2 + Math.floorMod(id.hashCode() * 17 + index * 7919, 300);
    }

    void submit(GenerationRequest r) {
        live.put(r.requestId(), new LiveRequest(r, r.promptTokenIds(), new int[0], now));
        now++; // distinct arrival times
    }

    int usedPages() {
        return live.values().stream().mapToInt(r -> pages(r.computed)).sum();
    }

    int pages(int tokens) {
        return (tokens + pageSize - 1) / pageSize;
    }

    /** One step: preempt for waiting, plan, admit (recovering as the engine does), run. */
    void step() {
        int stepNo = steps.size();
        scheduler.preemptForWaiting(live.values(), totalPages - usedPages()).forEach(this::preempt);
        Set<LiveRequest> excluded = new HashSet<>();
        while (true) {
            List<BatchRow> rows = scheduler.plan(live.values(), excluded, totalPages - usedPages());
            if (rows.isEmpty()) {
                steps.add(rows);
                now += stepFixedNanos;
                return;
            }
            check(rows);
            int need = rows.stream().mapToInt(b -> pages(b.start() + b.span()) - pages(b.start())).sum();
            if (need <= totalPages - usedPages()) {
                run(stepNo, rows);
                return;
            }
            BatchRow last = rows.get(rows.size() - 1);
            LiveRequest victim = scheduler.victim(live.values(), rows, last.request().id());
            if (victim != null) {
                preempt(victim);
            } else if (rows.size() > 1) {
                excluded.add(last.request());
            } else {
                throw new AssertionError("a request alone does not fit: " + last.request().id());
            }
        }
    }

    void runUntilIdle(int maxSteps) {
        while (!live.isEmpty()) {
            if (steps.size() >= maxSteps) {
                throw new AssertionError("still " + live.size() + " live after " + maxSteps + " steps: " + live.keySet());
            }
            step();
        }
    }

    private void check(List<BatchRow> rows) {
        int tokens = rows.stream().mapToInt(BatchRow::span).sum();
        if (rows.size() > maxRows || tokens > tokenBudget) {
            throw new AssertionError(rows.size() + " rows / " + tokens + " tokens over the limits");
        }
        Set<String> seen = new HashSet<>();
        for (BatchRow b : rows) {
            LiveRequest r = b.request();
            if (!seen.add(r.id()) || b.span() < 1 || b.span() > r.pending() || b.start() != r.computed
                    || b.samples() != (b.span() == r.pending()) || r.status == RequestStatus.OFFLOADED) {
                throw new AssertionError("bad row " + b);
            }
        }
    }

    private void run(int stepNo, List<BatchRow> rows) {
        steps.add(rows);
        int tokens = rows.stream().mapToInt(BatchRow::span).sum();
        long duration = stepFixedNanos + perTokenNanos * tokens;
        long decodes = rows.stream().filter(b -> b.span() == 1 && b.request().status == RequestStatus.RUNNING).count();
        if (decodes > 0) {
            decodeSteps.add(new long[] {duration, tokens - decodes});
        }
        now += duration;
        scheduler.observeStep(tokens, duration);
        for (BatchRow b : rows) {
            LiveRequest r = b.request();
            firstRow.putIfAbsent(r.id(), stepNo);
            r.status = RequestStatus.RUNNING;
            r.computed += b.span();
            r.lastActiveStep = stepNo;
            if (b.samples()) {
                int token = tokenOf(r.id(), r.generated.size());
                r.generated.add(token);
                outputs.computeIfAbsent(r.id(), k -> new ArrayList<>()).add(token);
                if (r.generated.size() == r.request.maxTokens()) {
                    live.remove(r.id());
                    finishedAt.put(r.id(), stepNo);
                    finishOrder.add(r.id());
                }
            }
        }
    }

    private void preempt(LiveRequest victim) {
        preemptions++;
        victim.dropKv();
    }
}
