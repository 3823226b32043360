package org.mstar.resources.position;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.Fork;
import org.mstar.resources.KVStep;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.runner.StepRunner;

/** Positions driven by the step runner next to the real KV manager: forks and pre-plans stay in lock-step. */
class RopeManagerWithKvTest {
    private final CpuDevice device = new CpuDevice(1);
    private final KVManager kv = new KVManager(PagedKVConfig.builder(1, 1, 8, 64).pageSize(4).maxNumPages(32).build(),
            device, DType.F32, 1, 0, null);
    private final RopeManager pos = new RopeManager(new PositionConfig("kv"), 8, device);
    private final StepRunner runner = new StepRunner(Map.of("kv", kv, "pos", pos), null);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    private static SubmoduleStep step(KVStep kvStep, List<String> rids, Segment... segments) {
        return new SubmoduleStep(Map.of("kv", kvStep, "pos", new PositionStep()), List.of(segments))
                .setCtx(new StepContext(rids, "decode", 0, false));
    }

    /** Stages {@code step} a step ahead. */
    private void preplan(SubmoduleStep step) {
        assertThat(runner.preAdmit(step).outcome().ok()).isTrue();
        runner.prePlan(step);
    }

    private void run(SubmoduleStep step) {
        assertThat(runner.admit(step).outcome().ok()).isTrue();
        runner.plan(step);
        runner.commit(step);
    }

    @Test
    void aStalePreplanLeavesCountersAsBeforeStagingAndAMatchingOneIsPromoted() {
        runner.ingestRequest("a", Map.of());
        runner.ingestRequest("b", Map.of());
        run(step(new KVStep(), List.of("a"), new Segment("a", "main", 5)));
        KVStep forking = KVStep.builder().preForks(List.of(new Fork("main", "cfg"))).build();
        SubmoduleStep decode = step(forking, List.of("a"), new Segment("a", "main", 1));

        preplan(decode);
        assertThat(pos.position("a", "cfg")).isEqualTo(5);
        run(step(new KVStep(), List.of("b"), new Segment("b", "main", 2)));
        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 5));

        preplan(decode);
        run(decode);
        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 6, "cfg", 5));
        assertThat(device.toInts(pos.posIds("main"))).containsExactly(5);
    }

    @Test
    void postForksStartTheTargetWhereTheSourceNowStands() {
        runner.ingestRequest("a", Map.of());
        KVStep forking = KVStep.builder().postForks(List.of(new Fork("main", "cfg"))).build();

        run(step(forking, List.of("a"), new Segment("a", "main", 3)));

        assertThat(pos.publish("a").counters()).isEqualTo(Map.of("main", 3, "cfg", 3));
    }

    @Test
    void aReplaysPaddingRowLeavesNoCounter() {
        runner.ingestRequest("a", Map.of());
        SubmoduleStep padded = step(new KVStep(), List.of("a"), new Segment("a", "main", 1), new Segment("-1", "main", 1));
        padded.ctx().setPaddedRequestIds(List.of("a", "-1"));

        run(padded);

        assertThat(pos.position("a", "main")).isEqualTo(1);
        assertThat(pos.publish("-1")).isNull();
    }
}
