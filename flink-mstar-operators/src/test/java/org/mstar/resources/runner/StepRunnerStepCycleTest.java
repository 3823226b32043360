package org.mstar.resources.runner;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.Resource;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.runner.RunnerFixtures.ctx;
import static org.mstar.resources.runner.RunnerFixtures.step;

/** admit / rollback / plan / commit over a step's resources (spec §2.1, §2.3; invariant 7). */
class StepRunnerStepCycleTest {
    private final List<String> journal = new ArrayList<>();
    private RecordingResource kv;
    private RecordingResource sampler;
    private RecordingResource attn;
    private RecordingResource pos;
    private StepRunner runner;

    @BeforeEach
    void setUp() {
        // Inserted against the order on purpose: levels are {kv, sampler} then {attn, pos}.
        Map<String, Resource> resources = new LinkedHashMap<>();
        resources.put("pos", pos = new RecordingResource("pos", journal, "kv"));
        resources.put("attn", attn = new RecordingResource("attn", journal, "kv"));
        resources.put("sampler", sampler = new RecordingResource("sampler", journal));
        resources.put("kv", kv = new RecordingResource("kv", journal));
        runner = new StepRunner(resources, null);
    }

    @Test
    void orderIsTopologicalAndAlphabeticalWithinALevel() {
        assertThat(runner.order()).containsExactly("kv", "sampler", "attn", "pos");
        assertThat(runner.resources().keySet()).containsExactlyElementsOf(runner.order());
    }

    @Test
    void admitPlanAndCommitRunInTopologicalOrderOverTheStepsKeysOnly() {
        SubmoduleStep step = step(ctx("r1"), "pos", "attn", "kv");

        assertThat(runner.admit(step)).isEqualTo(FullAdmitOutcome.OK);
        runner.plan(step);
        runner.commit(step);

        assertThat(journal).containsExactly(
                "kv.admit", "attn.admit", "pos.admit",
                "kv.plan", "attn.plan", "pos.plan",
                "kv.commit", "attn.commit", "pos.commit");
    }

    @Test
    void aCommitInTwoPartsCommitsEachResourceOnceInTopologicalOrderWithinEachPart() {
        SubmoduleStep step = step(ctx("r1"), "kv", "sampler", "attn", "pos");
        runner.admit(step);
        runner.plan(step);
        journal.clear();

        runner.commit(step, key -> !key.equals("sampler"));
        runner.commit(step, "sampler"::equals);

        assertThat(journal).containsExactly("kv.commit", "attn.commit", "pos.commit", "sampler.commit");
    }

    @Test
    void refusalRollsBackEveryReachedResourceIncludingTheRefusingOneInReverse() {
        AllocationFailed shortOfPages = new AllocationFailed("out of pages", 3, "main", "r1", null, null, null);
        attn.admitAnswer = AdmitOutcome.refused(shortOfPages);

        FullAdmitOutcome outcome = runner.admit(step(ctx("r1"), "kv", "sampler", "attn", "pos"));

        assertThat(outcome.ok()).isFalse();
        assertThat(outcome.failedResource()).isEqualTo("attn");
        assertThat(outcome.reason()).isSameAs(shortOfPages);
        assertThat(journal).containsExactly(
                "kv.admit", "sampler.admit", "attn.admit",
                "attn.rollbackAdmit", "sampler.rollbackAdmit", "kv.rollbackAdmit");
    }

    @Test
    void failedResourceNamesTheFirstRefusalInTopologicalOrder() {
        pos.admitAnswer = AdmitOutcome.refused(new AdmitRuntimeError("pos refuses", Set.of("r1")));
        sampler.admitAnswer = AdmitOutcome.refused(new AdmitRuntimeError("sampler refuses", Set.of("r1")));

        FullAdmitOutcome outcome = runner.admit(step(ctx("r1"), "kv", "sampler", "attn", "pos"));

        assertThat(outcome.failedResource()).isEqualTo("sampler");
        assertThat(journal).doesNotContain("attn.admit", "pos.admit");
    }

    @Test
    void notReadyIsTheAndOfEveryResourcesReadiness() {
        kv.admitAnswer = AdmitOutcome.NOT_READY;

        FullAdmitOutcome outcome = runner.admit(step(ctx("r1"), "kv", "attn"));

        assertThat(outcome).isEqualTo(FullAdmitOutcome.NOT_READY);
        assertThat(outcome.ok()).isTrue();
        assertThat(outcome.ready()).isFalse();
        assertThat(outcome.failedResource()).isNull();
        assertThat(journal).containsExactly("kv.admit", "attn.admit");
    }

    @Test
    void anAdmitThatThrowsIsRolledBackLikeARefusal() {
        IllegalStateException boom = new IllegalStateException("boom");
        attn.admitFailure = boom;

        assertThatThrownBy(() -> runner.admit(step(ctx("r1"), "kv", "attn", "pos"))).isSameAs(boom);
        assertThat(journal).containsExactly("kv.admit", "attn.admit", "attn.rollbackAdmit", "kv.rollbackAdmit");
    }

    @Test
    void rollbackAdmitUnwindsEveryDeclaredResourceInReverse() {
        SubmoduleStep step = step(ctx("r1"), "kv", "attn", "pos");
        runner.admit(step);
        journal.clear();

        runner.rollbackAdmit(step);

        assertThat(journal).containsExactly("pos.rollbackAdmit", "attn.rollbackAdmit", "kv.rollbackAdmit");
    }

    @Test
    void eachPlanSeesTheResultsOfTheResourcesBeforeIt() {
        SubmoduleStep step = step(ctx("r1"), "kv", "attn", "pos");

        Map<String, Object> results = runner.plan(step);

        assertThat(kv.planResultsSeen).containsExactly(Map.of());
        assertThat(attn.planResultsSeen).containsExactly(Map.of("kv", "kv-plan"));
        assertThat(pos.planResultsSeen).containsExactly(Map.of("kv", "kv-plan", "attn", "attn-plan"));
        assertThat(results).containsExactly(
                Map.entry("kv", "kv-plan"), Map.entry("attn", "attn-plan"), Map.entry("pos", "pos-plan"));
        assertThat(step.ctx().planResults()).isEqualTo(results);
    }

    @Test
    void planClearsTheResultsOfAnEarlierStep() {
        StepContext shared = ctx("r1");
        runner.plan(step(shared, "kv", "attn"));

        runner.plan(step(shared, "sampler"));

        assertThat(sampler.planResultsSeen).containsExactly(Map.of());
        assertThat(shared.planResults()).containsOnlyKeys("sampler");
    }

    @Test
    void aStepNamingAnUnknownResourceIsRefusedByName() {
        assertThatThrownBy(() -> runner.admit(step(ctx("r1"), "kv", "ropes")))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'ropes'");
    }

    @Test
    void constructionRefusesAnUndeclaredDependencyAndACycle() {
        Map<String, Resource> missing = Map.of("attn", new RecordingResource("attn", journal, "kv"));
        assertThatThrownBy(() -> new StepRunner(missing, null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'attn'").hasMessageContaining("'kv'");

        Map<String, Resource> cycle = Map.of(
                "a", new RecordingResource("a", journal, "b"),
                "b", new RecordingResource("b", journal, "a"));
        assertThatThrownBy(() -> new StepRunner(cycle, null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("cycle").hasMessageContaining("a -> b -> a");
    }
}
