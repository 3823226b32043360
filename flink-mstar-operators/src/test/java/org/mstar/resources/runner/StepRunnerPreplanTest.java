package org.mstar.resources.runner;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.BucketKey;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.Resource;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.runner.RunnerFixtures.ctx;
import static org.mstar.resources.runner.RunnerFixtures.step;

/** Pre-admit / pre-plan of the pre-planning subset, promotion and staleness (spec §1.3; invariant 10). */
class StepRunnerPreplanTest {
    private static final String[] ALL = {"kv", "attn", "sampler"};

    private final List<String> journal = new ArrayList<>();
    private RecordingResource kv;
    private RecordingResource attn;
    private RecordingResource sampler;
    private StepRunner runner;

    @BeforeEach
    void setUp() {
        kv = new RecordingResource("kv", journal);
        attn = new RecordingResource("attn", journal, "kv");
        sampler = new RecordingResource("sampler", journal);
        kv.preplans = true;
        attn.preplans = true;
        Map<String, Resource> resources = new LinkedHashMap<>();
        resources.put("kv", kv);
        resources.put("attn", attn);
        resources.put("sampler", sampler);
        runner = new StepRunner(resources, null);
    }

    /** A leased decode step of {@code rids}, as the plan thread and then the GPU thread would each build it. */
    private static SubmoduleStep leasedDecode(String... rids) {
        StepContext ctx = ctx(rids);
        ctx.setSlotLease(new SlotLease(1, new BucketKey("decode", 4, 4)));
        return step(ctx, ALL);
    }

    private void stage(SubmoduleStep step) {
        assertThat(runner.preAdmit(step)).isEqualTo(FullAdmitOutcome.OK);
        runner.prePlan(step);
        journal.clear();
    }

    @Test
    void aPreplanningResourceMustOnlyDependOnPreplanningResources() {
        RecordingResource base = new RecordingResource("kv", journal);
        RecordingResource dependent = new RecordingResource("attn", journal, "kv");
        dependent.preplans = true;

        assertThatThrownBy(() -> new StepRunner(Map.of("kv", base, "attn", dependent), null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'attn'").hasMessageContaining("'kv'");
    }

    @Test
    void preAdmitAndPrePlanTouchOnlyThePreplanningSubsetAndStageTheStep() {
        SubmoduleStep step = leasedDecode("r1", "r2");
        step.ctx().planResults().put("earlier", "kept");

        runner.preAdmit(step);
        Map<String, Object> pending = runner.prePlan(step);

        assertThat(journal).containsExactly("kv.admit", "attn.admit", "kv.plan", "attn.plan");
        assertThat(kv.preplanSeen).containsExactly(true);
        assertThat(attn.planResultsSeen).containsExactly(Map.of("earlier", "kept", "kv", "kv-plan"));
        assertThat(pending).containsOnlyKeys("kv", "attn");
        assertThat(step.ctx().isPreplan()).isFalse();
        assertThat(runner.staged()).isTrue();
    }

    @Test
    void aMatchingStepPromotesTheStagedPlanWithoutClearingIt() {
        stage(leasedDecode("r1", "r2"));

        SubmoduleStep real = leasedDecode("r1", "r2");
        runner.admit(real);
        runner.plan(real);

        assertThat(journal).doesNotContain("kv.clearPreplan", "attn.clearPreplan", "sampler.clearPreplan");
        assertThat(kv.preplanSeen).containsExactly(true, false);
        assertThat(runner.staged()).isFalse();
    }

    @Test
    void aDifferentStepClearsTheStagedPlanOnEveryPreplanningResourceBeforeAdmitting() {
        stage(leasedDecode("r1", "r2"));

        // A new prefill reached the GPU thread first: other rows, other segments.
        runner.admit(leasedDecode("r3"));

        assertThat(journal).containsExactly(
                "attn.clearPreplan", "kv.clearPreplan",
                "kv.admit", "sampler.admit", "attn.admit");
        assertThat(runner.staged()).isFalse();
    }

    @Test
    void anotherSlotLeaseMakesTheStagedPlanStale() {
        stage(leasedDecode("r1"));
        SubmoduleStep otherSlot = leasedDecode("r1");
        otherSlot.ctx().setSlotLease(new SlotLease(0, new BucketKey("decode", 4, 4)));

        runner.plan(otherSlot);

        assertThat(journal).startsWith("attn.clearPreplan", "kv.clearPreplan");
    }

    @Test
    void aRefusedPreAdmitUnwindsLikeAdmit() {
        attn.admitAnswer = AdmitOutcome.refused(new AllocationFailed("short", 1, "main", "r1"));

        FullAdmitOutcome outcome = runner.preAdmit(leasedDecode("r1"));

        assertThat(outcome.failedResource()).isEqualTo("attn");
        assertThat(journal).containsExactly("kv.admit", "attn.admit", "attn.rollbackAdmit", "kv.rollbackAdmit");
        assertThat(runner.staged()).isFalse();
    }

    @Test
    void clearPreplanDropsTheRecordOfTheStage() {
        stage(leasedDecode("r1"));

        runner.clearPreplan();

        assertThat(journal).containsExactly("attn.clearPreplan", "kv.clearPreplan");
        assertThat(runner.staged()).isFalse();
    }
}
