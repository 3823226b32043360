package org.mstar.flink;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.StepResult;
import org.mstar.schemas.GenerateRequest;

/**
 * The token ids an engine generates for requests served together without interruption, each request converted as
 * the generate operator converts it. Generation is deterministic, so this is what a job must produce for them
 * whatever failed and was restored meanwhile.
 */
public final class UninterruptedRun {
    private UninterruptedRun() {}

    /**
     * @param config the job's configuration, for the operator's request defaults (default max tokens)
     * @throws IllegalStateException when the engine fails a request
     */
    public static Map<String, List<Integer>> tokens(List<GenerateRequest> requests, GenerationEngine engine,
                                                    ReadableConfig config) {
        RequestConverter converter = GenerateSettings.from(config).converter();
        Map<String, List<Integer>> out = new LinkedHashMap<>();
        for (GenerateRequest r : requests) {
            engine.submit(converter.convert(r));
            out.put(r.getRequestId(), new ArrayList<>());
        }
        while (engine.hasWork()) {
            StepResult step = engine.step();
            if (!step.failures().isEmpty()) {
                throw new IllegalStateException("the uninterrupted run failed requests: " + step.failures());
            }
            step.tokens().forEach(t -> out.get(t.requestId()).add(t.tokenId()));
        }
        return out;
    }
}
