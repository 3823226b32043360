package org.mstar.jobs;

import java.util.UUID;
import org.mstar.schemas.GenerateRequest;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** The request fields the command line sets; unset ones take the server's defaults. */
final class SamplingFlags {
    @Option(names = "--max-tokens", paramLabel = "N", description = "Most tokens to generate per prompt.")
    Integer maxTokens;

    @Option(names = "--temperature", paramLabel = "T", description = "0 is greedy.")
    Double temperature;

    @Option(names = "--seed", paramLabel = "S", description = "Sampler seed.")
    Long seed;

    @Mixin
    ConstraintFlags constraint;

    /** A request for {@code prompt} with a fresh id. */
    GenerateRequest request(String prompt) {
        GenerateRequest request = GenerateRequest.newBuilder()
                .setRequestId(UUID.randomUUID().toString())
                .setPrompt(prompt)
                .setMaxTokens(maxTokens)
                .setTemperature(temperature)
                .setSeed(seed)
                .build();
        constraint.applyTo(request);
        return request;
    }
}
