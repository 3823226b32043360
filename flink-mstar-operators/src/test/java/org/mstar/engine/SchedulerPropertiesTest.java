package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Random loads (prompt and output lengths, priorities, arrivals spread over time, a page pool smaller than
 * the load) stepped through the scheduler: every step within the row and token limits, every request
 * completes (none starves), each with exactly its own token sequence however often it was preempted, and
 * without aging strict priorities order first admission. Whenever the scheduler says the next step is known before
 * the tokens of a decode step are in (so the engine may launch it ahead), it is the step it then plans.
 */
class SchedulerPropertiesTest {

    record Load(List<GenerationRequest> requests, List<Integer> arrivalSteps, int rows, int budget, int pages,
                SchedulingPolicy policy, long aging) {}

    @Provide
    Arbitrary<Load> loads() {
        Arbitrary<GenerationRequest> request = Combinators.combine(
                Arbitraries.integers().between(1, 60), Arbitraries.integers().between(1, 12),
                Arbitraries.integers().between(0, 3)).as((p, m, prio) -> SchedulerSimulation.request("x", p, m, prio));
        return Combinators.combine(request.list().ofMinSize(1).ofMaxSize(24),
                        Arbitraries.integers().between(0, 30).list().ofSize(24),
                        Arbitraries.integers().between(1, 8), Arbitraries.integers().between(1, 64),
                        Arbitraries.integers().between(0, 40), Arbitraries.of(SchedulingPolicy.class),
                        Arbitraries.longs().between(0, 400))
                .as((reqs, arrivals, rows, budget, extraPages, policy, aging) -> {
                    List<GenerationRequest> named = new ArrayList<>();
                    for (int i = 0; i < reqs.size(); i++) {
                        GenerationRequest r = reqs.get(i);
                        named.add(SchedulerSimulation.request("r" + i, r.promptTokenIds().length, r.maxTokens(),
                                r.priority()));
                    }
                    // the largest request must fit alone (the engine refuses others with a 400 at submit)
                    int largest = named.stream().mapToInt(r -> (r.promptTokenIds().length + r.maxTokens() + 3) / 4)
                            .max().orElse(1);
                    return new Load(named, arrivals.subList(0, named.size()), rows, budget, largest + extraPages,
                            policy, aging);
                });
    }

    @Property(tries = 300)
    void everyStepKeepsTheLimitsAndEveryRequestCompletesWithItsOwnTokens(@ForAll("loads") Load load) {
        SchedulerSimulation sim = run(load);
        for (GenerationRequest r : load.requests()) {
            List<Integer> expected = new ArrayList<>();
            for (int i = 0; i < r.maxTokens(); i++) {
                expected.add(SchedulerSimulation.tokenOf(r.requestId(), i));
            }
            assertThat(sim.outputs.get(r.requestId())).as(r.requestId()).isEqualTo(expected);
        }
        assertThat(sim.usedPages()).isZero();
    }

    @Property(tries = 200)
    void withoutAgingAHigherPriorityIsNeverFirstAdmittedAfterALowerOneThatWaitedBesideIt(@ForAll("loads") Load given) {
        Load load = new Load(given.requests(), given.arrivalSteps(), given.rows(), given.budget(), given.pages() + 1000,
                SchedulingPolicy.PRIORITY, 0);
        SchedulerSimulation sim = run(load);
        Map<String, Integer> arrived = arrivals(load);
        for (GenerationRequest hi : load.requests()) {
            for (GenerationRequest lo : load.requests()) {
                int loFirst = sim.firstRow.get(lo.requestId());
                boolean bothWaiting = arrived.get(hi.requestId()) <= loFirst;
                if (hi.priority() > lo.priority() && bothWaiting) {
                    assertThat(sim.firstRow.get(hi.requestId())).as(hi.requestId() + " over " + lo.requestId())
                            .isLessThanOrEqualTo(loFirst);
                }
            }
        }
    }

    @Property(tries = 300)
    void aStepTheSchedulerCallsKnownAheadIsTheStepItPlans(@ForAll("loads") Load load) {
        // the engine decides when the step after a decode step is asked for, with the requests that arrived since
        run(load, sim -> {
            List<BatchRow> last = sim.steps.isEmpty() ? List.of() : sim.steps.get(sim.steps.size() - 1);
            if (last.isEmpty() || !last.stream().allMatch(b -> b.span() == 1 && b.samples())) {
                return; // only a step of decode rows stages its successor
            }
            Set<LiveRequest> inFlight = new HashSet<>();
            List<BatchRow> staged = new ArrayList<>();
            for (BatchRow b : last) {
                inFlight.add(b.request());
                if (sim.live.get(b.request().id()) == b.request()) {
                    staged.add(new BatchRow(b.request(), b.request().computed, 1, true));
                }
            }
            if (staged.isEmpty() || !sim.scheduler.plansExactly(sim.live.values(), inFlight, staged)) {
                return;
            }
            int free = load.pages() - sim.usedPages();
            assertThat(sim.scheduler.preemptForWaiting(sim.live.values(), free))
                    .as("no staged request is preempted").doesNotContainAnyElementsOf(inFlight);
            assertThat(sim.scheduler.plan(sim.live.values(), Set.of(), free)).isEqualTo(staged);
        });
    }

    private static SchedulerSimulation run(Load load) {
        return run(load, sim -> { });
    }

    /**
     * Steps {@code load} through a simulation until every request is done, calling {@code beforeStep} before each
     * step, once the requests arriving at it are in.
     */
    private static SchedulerSimulation run(Load load, Consumer<SchedulerSimulation> beforeStep) {
        SchedulerOptions options = new SchedulerOptions(load.policy(), Duration.ofNanos(load.aging()), Duration.ZERO, 16);
        SchedulerSimulation sim = new SchedulerSimulation(load.rows(), load.budget(), 4, load.pages(), options, 10, 1);
        Map<String, Integer> arrived = arrivals(load);
        int step = 0;
        int submitted = 0;
        while (submitted < load.requests().size() || !sim.live.isEmpty()) {
            for (GenerationRequest r : load.requests()) {
                if (arrived.get(r.requestId()) == step) {
                    sim.submit(r);
                    submitted++;
                }
            }
            beforeStep.accept(sim);
            sim.step();
            step++;
            assertThat(step).as("steps until every request completed").isLessThan(20_000);
            assertThat(sim.usedPages()).isLessThanOrEqualTo(load.pages());
        }
        return sim;
    }

    private static Map<String, Integer> arrivals(Load load) {
        Map<String, Integer> at = new java.util.HashMap<>();
        for (int i = 0; i < load.requests().size(); i++) {
            at.put(load.requests().get(i).requestId(), load.arrivalSteps().get(i));
        }
        return at;
    }
}
