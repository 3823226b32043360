package org.mstar.jobs;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import org.mstar.flink.KafkaClientProperties;
import org.mstar.schemas.GenerateRequest;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code mstar send}: produce prompts or audio to a running job and print its streamed responses. */
@Command(name = "send", mixinStandardHelpOptions = true,
        description = "Send prompts (or audio to transcribe) to a running job and print the responses as they stream.")
final class SendCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Mixin
    KafkaTopics topics;

    @Mixin
    KafkaClientFlags kafkaClient;

    @Option(names = "-D", paramLabel = "mstar.kafka.PROPERTY=VALUE",
            description = "A Kafka client property, e.g. -Dmstar.kafka.client.id=me; wins over --kafka-properties.")
    Map<String, String> options = new HashMap<>();

    @Mixin
    SamplingFlags sampling;

    @Option(names = "--adapter", paramLabel = "NAME",
            description = "Generate with this LoRA adapter of the job's adapters folder (serve --adapters); unset: the"
                    + " base model. A name the job does not serve is answered with a 400.")
    String adapter;

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "Give up after this long. Default: ${DEFAULT-VALUE}.")
    long timeoutSeconds = 120;

    @Mixin
    AudioFlags audio;

    @Parameters(paramLabel = "PROMPT", description = "Prompts; when none are given (and no audio), one per line from stdin.")
    List<String> prompts;

    @Override
    public Integer call() throws Exception {
        List<GenerateRequest> requests;
        if (audio.any()) {
            if (prompts != null && !prompts.isEmpty()) {
                throw new ParameterException(spec.commandLine(), "Give prompts or audio (--audio, --audio-path), not both.");
            }
            requests = audio.audio().stream().map(sampling::request).toList();
        } else {
            List<String> texts = prompts != null && !prompts.isEmpty() ? prompts
                    : new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).lines()
                            .filter(l -> !l.isBlank()).toList();
            requests = texts.stream().map(sampling::request).toList();
            if (requests.isEmpty()) {
                throw new ParameterException(spec.commandLine(),
                        "Nothing to send: give prompts as arguments, one per line on stdin, or audio.");
            }
        }
        requests.forEach(r -> r.setAdapter(adapter));
        for (String key : options.keySet()) {
            if (!KafkaClientProperties.isPropertyKey(key)) {
                throw new ParameterException(spec.commandLine(),
                        "send takes -D for Kafka client properties only (-Dmstar.kafka.<property>=VALUE), not '"
                                + key + "'.");
            }
        }
        Properties clientProperties = kafkaClient.properties(options);
        try {
            KafkaCheck.topics(topics.bootstrapServers, clientProperties,
                    List.of(topics.requestsTopic, topics.responsesTopic), false, 1, KafkaCheck.TIMEOUT);
        } catch (KafkaCheck.KafkaUnavailable e) {
            spec.commandLine().getErr().println(e.getMessage());
            return 2;
        }
        try (GenerateClient client = new GenerateClient(topics.bootstrapServers, clientProperties, topics.requestsTopic,
                topics.responsesTopic)) {
            return exchange(spec.commandLine(), client, requests, Duration.ofSeconds(timeoutSeconds));
        }
    }

    /**
     * Sends {@code requests} and prints their responses to the command's output (usage and errors to its error
     * stream); 0 when every request got its result, 1 when any got an error event or none in time.
     */
    static int exchange(CommandLine cli, GenerateClient client, List<GenerateRequest> requests, Duration timeout)
            throws Exception {
        Set<String> ids = new LinkedHashSet<>();
        Map<String, String> asked = new HashMap<>();
        for (GenerateRequest r : requests) {
            client.send(r);
            ids.add(r.getRequestId());
            asked.put(r.getRequestId(), ResponsePrinter.asked(r));
        }
        ResponsePrinter printer = new ResponsePrinter(cli.getOut(), cli.getErr(), ids.size() == 1, asked);
        Set<String> unanswered = client.await(ids, timeout, printer);
        if (!unanswered.isEmpty()) {
            cli.getErr().println("No complete response within " + timeout.toSeconds() + " s for " + unanswered);
            return 1;
        }
        if (printer.errors() > 0) {
            cli.getErr().println(printer.errors() + " of " + ids.size() + " requests were answered with an error");
            return 1;
        }
        return 0;
    }
}
