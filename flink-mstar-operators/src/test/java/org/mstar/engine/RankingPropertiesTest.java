package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;

/**
 * What {@link Ranking} promises whoever competes (generation requests, frame sessions): the order is total and
 * consistent with the policy, and a waiting head preempts only those it outranks, the lowest first, and only enough
 * of them, or none when even all of them would not make room.
 */
class RankingPropertiesTest {

    record Competitor(int id, long arrival, int priority, int held) {}

    private static List<Competitor> competitors(List<Integer> priorities, List<Integer> held) {
        List<Competitor> out = new ArrayList<>();
        for (int i = 0; i < priorities.size(); i++) {
            out.add(new Competitor(i, i * 1_000L, priorities.get(i), held.get(i % held.size())));
        }
        return out;
    }

    private static Ranking<Competitor> ranking(boolean priority, long agingNanos) {
        return new Ranking<>(priority ? SchedulingPolicy.PRIORITY : SchedulingPolicy.FCFS,
                Duration.ofNanos(agingNanos), Competitor::arrival, Competitor::priority);
    }

    @Property
    void fcfsRanksByArrivalAndNeverPreempts(
            @ForAll @Size(min = 1, max = 12) List<@IntRange(min = -3, max = 3) Integer> priorities,
            @ForAll @Size(min = 1, max = 4) List<@IntRange(min = 0, max = 4) Integer> held,
            @ForAll @IntRange(max = 20) int need) {
        List<Competitor> all = competitors(priorities, held);
        Ranking<Competitor> fcfs = ranking(false, 0);
        List<Competitor> sorted = new ArrayList<>(all);
        sorted.sort(fcfs.order());
        assertThat(sorted).isEqualTo(all); // arrivals increase with the index
        Competitor last = all.get(all.size() - 1);
        assertThat(fcfs.victims(last, all.subList(0, all.size() - 1), 0, need, Competitor::held)).isEmpty();
    }

    @Property
    void aHeadPreemptsOnlyWhomItOutranksLowestFirstAndOnlyEnough(
            @ForAll @Size(min = 1, max = 12) List<@IntRange(min = -3, max = 3) Integer> priorities,
            @ForAll @Size(min = 1, max = 4) List<@IntRange(min = 0, max = 4) Integer> held,
            @ForAll @LongRange(max = 3_000) long aging, @ForAll @IntRange(max = 6) int available,
            @ForAll @IntRange(max = 20) int need) {
        List<Competitor> all = competitors(priorities, held);
        Ranking<Competitor> ranking = ranking(true, aging);
        Competitor head = all.get(all.size() - 1);
        List<Competitor> running = all.subList(0, all.size() - 1);
        List<Competitor> victims = ranking.victims(head, running, available, need, Competitor::held);

        int freed = available + victims.stream().mapToInt(Competitor::held).sum();
        for (int i = 0; i < victims.size(); i++) {
            assertThat(ranking.order().compare(victims.get(i), head)).as("a victim ranks below the head").isPositive();
            if (i > 0) {
                assertThat(ranking.order().compare(victims.get(i - 1), victims.get(i))).isPositive();
            }
        }
        if (!victims.isEmpty()) {
            assertThat(freed).isGreaterThanOrEqualTo(need);
            int withoutLast = freed - victims.get(victims.size() - 1).held();
            assertThat(withoutLast).as("no more victims than needed").isLessThan(need);
        } else if (available < need) {
            // none: even every running competitor the head outranks would not make room
            int outranked = running.stream().filter(r -> ranking.order().compare(r, head) > 0)
                    .mapToInt(Competitor::held).sum();
            assertThat(available + outranked).isLessThan(need);
        }
    }
}
