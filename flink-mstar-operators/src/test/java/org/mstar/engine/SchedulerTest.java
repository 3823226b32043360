package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.groups.Tuple.tuple;
import static org.mstar.engine.SchedulerSimulation.request;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SchedulerTest {
    private static final SchedulerOptions FCFS = SchedulerOptions.DEFAULTS.withPolicy(SchedulingPolicy.FCFS);
    private static final SchedulerOptions STRICT =
            new SchedulerOptions(SchedulingPolicy.PRIORITY, Duration.ZERO, Duration.ZERO, 16);

    @Test
    void prefillChunksEndAtTheModelsChunkEdges() {
        Scheduler scheduler = new Scheduler(8, 20, 4, 0, 8, FCFS);
        GenerationRequest request = request("b", 30, 4, 0);
        LiveRequest b = new LiveRequest(request, request.promptTokenIds(), new int[0], 0);
        for (int[] computedAndSpan : new int[][] {{0, 8}, {5, 3}, {8, 8}, {24, 6}}) {
            b.computed = computedAndSpan[0];
            assertThat(scheduler.plan(List.of(b), Set.of(), 1000)).extracting(BatchRow::span)
                    .as("from %d", b.computed).containsExactly(computedAndSpan[1]);
        }
    }

    @Test
    void decodesComeFirstThenPrefillChunksUnderTheBudget() {
        SchedulerSimulation sim = new SchedulerSimulation(8, 20, 4, 1000, FCFS, 0, 1);
        sim.submit(request("a", 3, 4, 0));
        sim.step(); // a prefilled, sampled its first token: decodes from now on
        sim.submit(request("b", 30, 4, 0));
        sim.submit(request("c", 30, 4, 0));
        sim.step();
        List<BatchRow> rows = sim.steps.get(1);
        assertThat(rows).extracting(b -> b.request().id(), BatchRow::span).containsExactly(
                tuple("a", 1), tuple("b", 19));
        assertThat(rows.get(1).samples()).as("a chunk short of the prompt's end samples nothing").isFalse();
        sim.step();
        assertThat(sim.steps.get(2)).extracting(b -> b.request().id(), BatchRow::span).containsExactly(
                tuple("a", 1), tuple("b", 11),
                tuple("c", 8));
    }

    @Test
    void strictPriorityGivesTheRowsToTheHighestLevelEvenOverRunningDecodes() {
        SchedulerSimulation sim = new SchedulerSimulation(2, 64, 4, 1000, STRICT, 0, 1);
        sim.submit(request("low-1", 4, 50, 0));
        sim.submit(request("low-2", 4, 50, 0));
        sim.step();
        sim.submit(request("high", 4, 3, 5));
        sim.step();
        assertThat(sim.steps.get(1)).as("rows: decodes first, but low-2 gave its row to high")
                .extracting(b -> b.request().id()).containsExactly("low-1", "high");
        sim.runUntilIdle(500);
        assertThat(sim.finishOrder.get(0)).isEqualTo("high");
    }

    @Test
    void underFcfsTheRowsStayWithTheEarliestArrivals() {
        SchedulerSimulation sim = new SchedulerSimulation(2, 64, 4, 1000, FCFS, 0, 1);
        sim.submit(request("low-1", 4, 5, 0));
        sim.submit(request("low-2", 4, 5, 0));
        sim.step();
        sim.submit(request("high", 4, 3, 5));
        sim.runUntilIdle(500);
        assertThat(sim.finishOrder).containsExactly("low-1", "low-2", "high");
    }

    @Test
    void agingLiftsALongWaitingRequestAboveNewerHigherOnes() {
        SchedulerOptions aging = new SchedulerOptions(SchedulingPolicy.PRIORITY, Duration.ofNanos(100), Duration.ZERO, 16);
        SchedulerSimulation sim = new SchedulerSimulation(1, 64, 4, 1000, aging, 0, 1);
        sim.submit(request("old-low", 4, 2, 0));
        sim.now += 1_000; // waited ten aging steps
        sim.submit(request("new-high", 4, 2, 5));
        sim.step();
        assertThat(sim.steps.get(0)).extracting(b -> b.request().id()).containsExactly("old-low");
    }

    @Test
    void withAgingTwoRequestsNeverSwapPlacesSoTheyCannotPreemptEachOtherForever() {
        // Found by the property test: with levels rounded per aging step, a priority-0 request and a newer
        // priority-1 one swapped ranks every step and, each needing the whole pool, preempted each other forever.
        SchedulerOptions aging = new SchedulerOptions(SchedulingPolicy.PRIORITY, Duration.ofNanos(2), Duration.ZERO, 16);
        SchedulerSimulation sim = new SchedulerSimulation(1, 1, 4, 5, aging, 10, 1);
        sim.submit(request("r0", 9, 4, 1));
        sim.submit(request("r1", 6, 3, 1));
        sim.submit(request("r2", 11, 9, 0));
        sim.submit(request("r3", 12, 8, 1));
        sim.runUntilIdle(500);
        assertThat(sim.finishOrder).hasSize(4);
    }

    @Test
    void aNewPromptThatDoesNotFitTheFreePagesWaitsAndSoDoLaterOnes() {
        SchedulerSimulation sim = new SchedulerSimulation(8, 64, 4, 10, FCFS, 0, 1);
        sim.submit(request("running", 20, 30, 0)); // 5 pages, growing
        sim.step();
        sim.submit(request("big", 40, 2, 0)); // 10 pages: cannot start beside it
        sim.submit(request("small", 4, 2, 0)); // would fit, but must not overtake big
        sim.step();
        assertThat(sim.steps.get(1)).extracting(b -> b.request().id()).containsExactly("running");
        assertThat(sim.scheduler.plan(List.of(sim.live.get("big")), Set.of(), 0))
                .as("alone in the step a request is always tried: admission decides").hasSize(1);
    }

    @Test
    void priorityPreemptsTheLowestRunningRequestForAHigherWaitingOne() {
        SchedulerSimulation sim = new SchedulerSimulation(8, 64, 4, 12, STRICT, 0, 1);
        sim.submit(request("low", 20, 20, 0)); // 5 pages
        sim.submit(request("mid", 20, 20, 1)); // 5 pages
        sim.step();
        sim.submit(request("high", 16, 2, 9)); // 4 pages; 2 free
        assertThat(sim.scheduler.preemptForWaiting(sim.live.values(), sim.totalPages - sim.usedPages()))
                .extracting(LiveRequest::id).containsExactly("low");
        SchedulerSimulation fcfs = new SchedulerSimulation(8, 64, 4, 12, FCFS, 0, 1);
        fcfs.submit(request("low", 20, 20, 0));
        fcfs.step();
        fcfs.submit(request("high", 40, 2, 9));
        assertThat(fcfs.scheduler.preemptForWaiting(fcfs.live.values(), 0)).isEmpty();
    }

    @Test
    void aVictimComesFromOutsideTheStepFirstAndFromInsideOnlyWhenItRanksBelow() {
        SchedulerSimulation sim = new SchedulerSimulation(8, 64, 4, 1000, FCFS, 0, 1);
        sim.submit(request("first", 4, 9, 0));
        sim.submit(request("second", 4, 9, 0));
        sim.submit(request("third", 4, 9, 0));
        sim.step();
        LiveRequest first = sim.live.get("first");
        LiveRequest second = sim.live.get("second");
        LiveRequest third = sim.live.get("third");
        List<BatchRow> onlyFirstTwo = List.of(row(first), row(second));
        assertThat(sim.scheduler.victim(sim.live.values(), onlyFirstTwo, "second")).isSameAs(third);
        List<BatchRow> all = List.of(row(first), row(second), row(third));
        assertThat(sim.scheduler.victim(sim.live.values(), all, "first")).isSameAs(third);
        assertThat(sim.scheduler.victim(sim.live.values(), all, "third"))
                .as("the newest never pushes out an older request in the step").isNull();
    }

    @Test
    void aWaitingRequestHoldingPagesCanBeTheVictim() {
        SchedulerSimulation sim = new SchedulerSimulation(8, 64, 4, 1000, FCFS, 0, 1);
        sim.submit(request("running", 4, 9, 0));
        sim.step();
        sim.submit(request("waiting", 9, 2, 0));
        LiveRequest running = sim.live.get("running");
        LiveRequest waiting = sim.live.get("waiting");
        waiting.computed = 8; // a cached prefix it took while it waits: its pages are held, not evictable

        assertThat(waiting.status).isEqualTo(RequestStatus.WAITING);
        assertThat(sim.scheduler.victim(sim.live.values(), List.of(row(running)), "running")).isSameAs(waiting);
        waiting.computed = 0;
        assertThat(sim.scheduler.victim(sim.live.values(), List.of(row(running)), "running"))
                .as("a waiting request holding nothing frees nothing").isNull();
    }

    @Test
    void offloadedRequestsComeBackInOrderButNotAheadOfAnOutrankingWaitingOne() {
        SchedulerSimulation sim = new SchedulerSimulation(8, 64, 4, 1000, STRICT, 0, 1);
        sim.submit(request("a", 4, 9, 1));
        sim.submit(request("b", 4, 9, 3));
        sim.step();
        sim.live.values().forEach(r -> r.status = RequestStatus.OFFLOADED);
        assertThat(sim.scheduler.resumeOrder(sim.live.values())).extracting(LiveRequest::id).containsExactly("b", "a");
        sim.submit(request("w", 4, 9, 2));
        assertThat(sim.scheduler.resumeOrder(sim.live.values())).extracting(LiveRequest::id).containsExactly("b");
    }

    @Test
    void theStallBoundKeepsStepsWithDecodesShortWhileALongPromptStillCompletes() {
        long fixed = 2_000_000;
        long perToken = 50_000;
        Duration bound = Duration.ofMillis(5); // 60 tokens' worth after the fixed cost
        SchedulerOptions fair = FCFS.withMaxPrefillStall(bound);
        SchedulerSimulation bounded = longPromptAmongDecodes(fair, fixed, perToken);
        SchedulerSimulation unbounded = longPromptAmongDecodes(FCFS, fixed, perToken);

        long worstBounded = bounded.decodeSteps.stream().skip(4).mapToLong(s -> s[0]).max().orElseThrow();
        long worstUnbounded = unbounded.decodeSteps.stream().mapToLong(s -> s[0]).max().orElseThrow();
        assertThat(worstBounded).isLessThanOrEqualTo(bound.toNanos());
        assertThat(worstUnbounded).isGreaterThan(bound.toNanos() * 2);
        assertThat(bounded.finishOrder).contains("long");
    }

    private static SchedulerSimulation longPromptAmongDecodes(SchedulerOptions options, long fixed, long perToken) {
        SchedulerSimulation sim = new SchedulerSimulation(16, 512, 16, 10_000, options, fixed, perToken);
        for (int i = 0; i < 4; i++) {
            sim.submit(request("d" + i, 8, 60, 0));
        }
        for (int i = 0; i < 6; i++) {
            sim.step(); // decodes running, the cost model warmed up
        }
        sim.submit(request("long", 2000, 4, 0));
        sim.runUntilIdle(10_000);
        return sim;
    }

    @Test
    void theNextPlanIsKnownBeforeTheTokensOnlyWhileTheRunningRowsFillTheStepAndOutrankTheRest() {
        SchedulerSimulation sim = new SchedulerSimulation(2, 64, 4, 1000, STRICT, 0, 1);
        sim.submit(request("a", 4, 9, 0));
        sim.submit(request("b", 4, 2, 0));
        sim.step();
        sim.submit(request("later", 4, 9, 0));
        Set<LiveRequest> inFlight = Set.of(sim.live.get("a"), sim.live.get("b"));
        List<BatchRow> both = List.of(row(sim.live.get("a")), row(sim.live.get("b")));

        assertThat(sim.scheduler.plansExactly(sim.live.values(), inFlight, both))
                .as("every row taken by requests that outrank the waiting one").isTrue();
        assertThat(sim.scheduler.plansExactly(sim.live.values(), inFlight, both.subList(0, 1)))
                .as("b leaves: its row is free for the waiting request").isFalse();
        sim.submit(request("urgent", 4, 9, 3));
        assertThat(sim.scheduler.plansExactly(sim.live.values(), inFlight, both))
                .as("a waiting request outranks a running one").isFalse();
        sim.live.remove("later");
        sim.live.remove("urgent");
        assertThat(sim.scheduler.plansExactly(sim.live.values(), inFlight, both.subList(0, 1)))
                .as("no one else is live").isTrue();
    }

    private static BatchRow row(LiveRequest r) {
        return new BatchRow(r, r.computed, 1, true);
    }
}
