package org.mstar.resources.runner;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.SamplingReqConfig;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** ingest / remove / capture rows over every resource (spec §2.2; invariant 8). */
class StepRunnerRequestSweepTest {
    private final List<String> journal = new ArrayList<>();
    private RecordingResource kv;
    private RecordingResource sampler;
    private RecordingResource attn;
    private RecordingResource pos;
    private StepRunner runner;

    @BeforeEach
    void setUp() {
        Map<String, Resource> resources = new LinkedHashMap<>();
        resources.put("kv", kv = new RecordingResource("kv", journal));
        resources.put("sampler", sampler = new RecordingResource("sampler", journal));
        resources.put("attn", attn = new RecordingResource("attn", journal, "kv"));
        resources.put("pos", pos = new RecordingResource("pos", journal, "kv"));
        runner = new StepRunner(resources, null);
    }

    private List<RecordingResource> all() {
        return List.of(kv, sampler, attn, pos);
    }

    @Test
    void ingestGivesEachResourceItsOwnConfigInTopologicalOrder() {
        KVReqConfig kvCfg = KVReqConfig.defaults();
        SamplingReqConfig samplingCfg = SamplingReqConfig.greedy();

        runner.ingestRequest("r1", Map.of("kv", kvCfg, "sampler", samplingCfg));

        assertThat(journal).containsExactly(
                "kv.ingestRequest:r1", "sampler.ingestRequest:r1", "attn.ingestRequest:r1", "pos.ingestRequest:r1");
        assertThat(kv.configs.get("r1")).isSameAs(kvCfg);
        assertThat(sampler.configs.get("r1")).isSameAs(samplingCfg);
        assertThat(attn.configs).containsEntry("r1", null);
    }

    @Test
    void aFailingIngestLeavesTheRequestOnNoResource() {
        IllegalStateException boom = new IllegalStateException("attn cannot take r1");
        attn.ingestFailure = boom;

        assertThatThrownBy(() -> runner.ingestRequest("r1", null)).isSameAs(boom);

        assertThat(journal).containsExactly(
                "kv.ingestRequest:r1", "sampler.ingestRequest:r1", "attn.ingestRequest:r1",
                "attn.removeRequest:r1", "sampler.removeRequest:r1", "kv.removeRequest:r1");
        assertThat(all()).allSatisfy(r -> assertThat(r.rids).doesNotContain("r1"));
    }

    @Test
    void aFailingSecondIngestUnwindsNothingItDidNotOpen() {
        runner.ingestRequest("r1", null);
        journal.clear();
        pos.ingestFailure = new IllegalStateException("pos fails the repeat");

        assertThatThrownBy(() -> runner.ingestRequest("r1", null)).hasMessage("pos fails the repeat");

        assertThat(journal).noneMatch(call -> call.contains("removeRequest"));
        assertThat(all()).allSatisfy(r -> assertThat(r.rids).contains("r1"));
    }

    @Test
    void aRepeatedIngestIsPassedOnForTheResourcesToIgnore() {
        SamplingReqConfig first = SamplingReqConfig.greedy();
        runner.ingestRequest("r1", Map.of("sampler", first));

        runner.ingestRequest("r1", Map.of("sampler", SamplingReqConfig.DEFAULTS));

        assertThat(sampler.configs.get("r1")).isSameAs(first);
    }

    @Test
    void afterRemovalAFailingIngestUnwindsEverythingAgain() {
        runner.ingestRequest("r1", null);
        runner.removeRequest("r1");
        journal.clear();
        sampler.ingestFailure = new IllegalStateException("no");

        assertThatThrownBy(() -> runner.ingestRequest("r1", null)).hasMessage("no");

        assertThat(journal).containsExactly(
                "kv.ingestRequest:r1", "sampler.ingestRequest:r1", "sampler.removeRequest:r1", "kv.removeRequest:r1");
    }

    @Test
    void removeReachesEveryResourceInOrderEvenPastOneThatThrows() {
        runner.ingestRequest("r1", null);
        journal.clear();
        sampler.removeFailure = new IllegalStateException("sampler leaked");

        assertThatThrownBy(() -> runner.removeRequest("r1")).hasMessage("sampler leaked");

        assertThat(journal).containsExactly(
                "kv.removeRequest:r1", "sampler.removeRequest:r1", "attn.removeRequest:r1", "pos.removeRequest:r1");
    }

    @Test
    void captureRowsOpenOnEveryResource() {
        runner.ingestCaptureRow("-1");

        assertThat(journal).containsExactly(
                "kv.ingestCaptureRow:-1", "sampler.ingestCaptureRow:-1", "attn.ingestCaptureRow:-1",
                "pos.ingestCaptureRow:-1");
    }
}
