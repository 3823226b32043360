package org.mstar.jobs.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** A schedule is the seed's alone: each kind as often as asked, in a shuffled order, overlaps followed closely. */
class FaultScheduleTest {
    private static final Set<FaultSchedule.Kind> KINDS = EnumSet.of(FaultSchedule.Kind.SERVE_KILL,
            FaultSchedule.Kind.KILL_AT_COMMIT, FaultSchedule.Kind.BROKER_OUTAGE, FaultSchedule.Kind.DISK_FULL);

    @Test
    void theSameSeedGivesTheSameScheduleWithEachKindAsOftenAsAsked() {
        List<FaultSchedule.Fault> schedule = FaultSchedule.of(7, KINDS, 30, 1_000, 4_000);

        assertThat(FaultSchedule.of(7, KINDS, 30, 1_000, 4_000)).isEqualTo(schedule);
        assertThat(FaultSchedule.of(8, KINDS, 30, 1_000, 4_000)).isNotEqualTo(schedule);
        Map<FaultSchedule.Kind, Long> counts = schedule.stream()
                .collect(Collectors.groupingBy(FaultSchedule.Fault::kind, Collectors.counting()));
        assertThat(counts).hasSize(KINDS.size()).allSatisfy((kind, n) -> assertThat(n).isEqualTo(30));
    }

    @Test
    void eachRoundBringsEveryKindOnceSoThatARunCutShortHasEveryKindAlike() {
        List<FaultSchedule.Fault> schedule = FaultSchedule.of(7, KINDS, 30, 1_000, 4_000);

        for (int round = 0; round < 30; round++) {
            assertThat(schedule.subList(round * KINDS.size(), (round + 1) * KINDS.size()))
                    .extracting(FaultSchedule.Fault::kind).containsExactlyInAnyOrderElementsOf(KINDS);
        }
    }

    @Test
    void aFaultAfterAnOverlappingOneComesWithinASecondAndTheOthersWithinTheGaps() {
        List<FaultSchedule.Fault> schedule = FaultSchedule.of(7, KINDS, 30, 1_000, 4_000);

        assertThat(schedule).filteredOn(FaultSchedule.Fault::overlaps).hasSizeBetween(15, 45);
        for (int i = 1; i < schedule.size(); i++) {
            long gap = schedule.get(i).gapMillis();
            if (schedule.get(i - 1).overlaps()) {
                assertThat(gap).isLessThan(1_000);
            } else {
                assertThat(gap).isBetween(1_000L, 4_000L);
            }
        }
        assertThat(schedule.stream().filter(f -> f.kind() == FaultSchedule.Kind.BROKER_OUTAGE)
                .map(FaultSchedule.Fault::lengthMillis)).allSatisfy(l -> assertThat(l).isBetween(15_000L, 25_000L));
    }

    @Test
    void kindsChosenByNameMustBeKindsTheTargetTakes() {
        assertThat(FaultSchedule.chosen("", KINDS)).isEqualTo(KINDS);
        assertThat(FaultSchedule.chosen("serve_kill, DISK_FULL", KINDS))
                .containsExactlyInAnyOrder(FaultSchedule.Kind.SERVE_KILL, FaultSchedule.Kind.DISK_FULL);
        assertThatThrownBy(() -> FaultSchedule.chosen("SERVE_KILL,NETWORK_SPLIT", KINDS))
                .hasMessageContaining("no fault kind NETWORK_SPLIT");
        assertThatThrownBy(() -> FaultSchedule.chosen("JOBMANAGER_KILL", KINDS))
                .hasMessageContaining("does not take JOBMANAGER_KILL");
    }
}
