package org.mstar.device.cuda.harness;

import java.util.Random;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.model.ModelConfig;
import org.mstar.resources.SamplingReqConfig;

/** What the engine benches submit and how they step: random prompts, greedy requests, steps that must not fail. */
final class BenchRequests {
    private BenchRequests() {}

    /** {@code tokens} ids drawn uniformly from {@code config}'s vocabulary (an EOS in a prompt stops nothing). */
    static int[] randomPrompt(Random rnd, ModelConfig config, int tokens) {
        return randomPrompt(rnd, config.vocabSize(), tokens);
    }

    /** {@code tokens} ids drawn uniformly from a vocabulary of {@code vocabSize}. */
    static int[] randomPrompt(Random rnd, int vocabSize, int tokens) {
        int[] prompt = new int[tokens];
        for (int j = 0; j < tokens; j++) {
            prompt[j] = rnd.nextInt(vocabSize);
        }
        return prompt;
    }

    /** A greedy request of {@code prompt} that may draw {@code maxTokens} tokens. */
    static GenerationRequest greedy(String id, int[] prompt, int maxTokens) {
        return greedy(id, prompt, maxTokens, null);
    }

    /** The same with the LoRA adapter {@code adapter} (null: the base model). */
    static GenerationRequest greedy(String id, int[] prompt, int maxTokens, String adapter) {
        return GenerationRequest.builder(id).promptTokenIds(prompt).sampling(SamplingReqConfig.greedy())
                .maxTokens(maxTokens).ignoreEos(true).adapter(adapter).build();
    }

    /**
     * Tokens a request may draw to decode through {@code steps} steps after its prefill: one more per prefill step
     * of a batch of {@code batch} prompts of {@code context} tokens, as a request whose prompt finishes early decodes
     * while the others still prefill (its decode rows take part of each step's {@code budget}, so the prefill steps
     * are counted at the budget less the batch), with room.
     */
    static int decodeAllowance(int batch, int context, int budget, int steps) {
        return steps + (int) ((long) batch * context / Math.max(1, budget - batch)) + 4;
    }

    /** One engine step; a failed request fails the bench. */
    static StepResult step(GenerationEngine engine) {
        StepResult r = engine.step();
        if (!r.failures().isEmpty()) {
            throw new IllegalStateException("engine failed requests: " + r.failures());
        }
        return r;
    }
}
