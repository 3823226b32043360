package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;

/** The real engine honours a request's priority: submitted last under load, a high-priority request finishes first. */
class EnginePriorityTest {

    @Test
    void aHighPriorityRequestSubmittedLastFinishesFirstUnderLoad(@TempDir Path dir) throws Exception {
        try (CpuDevice cpu = new CpuDevice(2); LlamaModel model = RandomModels.load(RandomModels.llama(), 5, dir, cpu)) {
            List<GenerationRequest> requests = new ArrayList<>();
            Random rnd = new Random(3);
            for (int i = 0; i < 8; i++) {
                requests.add(GenerationRequest.builder("low" + i).promptTokenIds(RandomModels.prompt(rnd, 12))
                        .sampling(SamplingReqConfig.DEFAULTS.withSeed(i)).maxTokens(24).ignoreEos(true).build());
            }
            GenerationRequest high = GenerationRequest.builder("high").promptTokenIds(RandomModels.prompt(rnd, 12))
                    .sampling(SamplingReqConfig.DEFAULTS.withSeed(99)).maxTokens(8).ignoreEos(true).priority(7)
                    .build();

            List<String> strict = finishOrder(model, SchedulingPolicy.PRIORITY, requests, high);
            List<String> fcfs = finishOrder(model, SchedulingPolicy.FCFS, requests, high);

            assertThat(strict.get(0)).isEqualTo("high");
            assertThat(fcfs.indexOf("high")).as("first come, first served: it waits its turn").isGreaterThan(2);
        }
    }

    private static List<String> finishOrder(LlamaModel model, SchedulingPolicy policy, List<GenerationRequest> low,
                                            GenerationRequest high) {
        SchedulerOptions scheduling = new SchedulerOptions(policy, Duration.ZERO, Duration.ZERO, 16);
        EngineOptions options = RandomModels.options(2, 64, 200, 4, 0).withScheduling(scheduling);
        List<String> order = new ArrayList<>();
        try (LlamaEngine engine = RandomModels.engine(model, options)) {
            low.forEach(engine::submit);
            engine.step(); // the first low-priority requests hold the rows
            engine.submit(high);
            while (engine.hasWork()) {
                engine.step().finished().forEach(f -> order.add(f.requestId()));
            }
        }
        return order;
    }
}
