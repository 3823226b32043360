package org.mstar.jobs;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.mstar.schemas.Audio;
import org.mstar.schemas.ChatTurn;
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

    @Option(names = "--chat", description = "Send each prompt as a user message (the request's messages), which the "
            + "server renders with the model folder's chat template.")
    boolean chat;

    @Option(names = "--system", paramLabel = "TEXT", description = "With --chat: a system message before each prompt.")
    String system;

    /** A speech-to-text request for {@code audio} with a fresh id. */
    GenerateRequest request(Audio audio) {
        return withSampling(GenerateRequest.newBuilder().setAudio(audio));
    }

    /** A request for {@code prompt} with a fresh id. */
    GenerateRequest request(String prompt) {
        GenerateRequest.Builder b = GenerateRequest.newBuilder();
        if (chat) {
            List<ChatTurn> turns = new ArrayList<>();
            if (system != null) {
                turns.add(new ChatTurn("system", system));
            }
            turns.add(new ChatTurn("user", prompt));
            b.setMessages(turns);
        } else {
            b.setPrompt(prompt);
        }
        return withSampling(b);
    }

    private GenerateRequest withSampling(GenerateRequest.Builder b) {
        GenerateRequest request = b.setRequestId(UUID.randomUUID().toString())
                .setMaxTokens(maxTokens)
                .setTemperature(temperature)
                .setSeed(seed)
                .build();
        constraint.applyTo(request);
        return request;
    }
}
