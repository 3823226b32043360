package org.mstar.sql;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.StepResult;

/**
 * The bundled tiny random Llama as the tests' model, and the reference its rows are checked against: each prompt
 * generated alone, through a bare engine, one request at a time.
 */
final class TinyModel {
    static final int MAX_TOKENS = 12;

    private TinyModel() {}

    /** The WITH options of the tests' model, plus {@code extra} ("key", "value", ...). */
    static Map<String, String> options(String... extra) {
        Map<String, String> o = new HashMap<>(Map.of("model.random", "tiny", "device", "cpu",
                "max-tokens", Integer.toString(MAX_TOKENS), "engine.max-batch-rows", "8"));
        for (int i = 0; i < extra.length; i += 2) {
            o.put(extra[i], extra[i + 1]);
        }
        return o;
    }

    /** The SQL of {@code options}, for a WITH clause. */
    static String with(Map<String, String> options) {
        StringBuilder s = new StringBuilder("'provider' = 'mstar'");
        options.forEach((k, v) -> s.append(", '").append(k).append("' = '").append(v.replace("'", "''")).append('\''));
        return s.toString();
    }

    static ModelSettings settings(Map<String, String> options) {
        return ModelSettings.from(Configuration.fromMap(options));
    }

    static GenerationEngine engine(ModelSettings settings) throws Exception {
        return settings.engineFactory(RandomModels.folder(RandomModels.TINY).toString()).create("cpu", 0);
    }

    /** Each prompt generated alone under {@code options}: the text a row with that prompt must get. */
    static Map<String, String> reference(Map<String, String> options, List<String> prompts) throws Exception {
        ModelSettings settings = settings(options);
        RowConverter converter = new RowConverter(settings,
                new ModelColumns(0, -1, List.of(ModelColumns.Output.TEXT)));
        Map<String, String> texts = new HashMap<>();
        try (GenerationEngine engine = engine(settings)) {
            for (String prompt : prompts) {
                engine.submit(converter.request("ref", org.apache.flink.table.data.GenericRowData.of(
                        org.apache.flink.table.data.StringData.fromString(prompt))));
                texts.put(prompt, runAlone(engine).text());
            }
        }
        return texts;
    }

    private static FinishedRequest runAlone(GenerationEngine engine) {
        List<FinishedRequest> done = new ArrayList<>();
        while (engine.hasWork()) {
            StepResult step = engine.step();
            if (!step.failures().isEmpty()) {
                throw new AssertionError("reference failed: " + step.failures());
            }
            done.addAll(step.finished());
        }
        return done.get(0);
    }

    static List<String> prompts(int n) {
        List<String> prompts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            prompts.add("Prompt number " + i + (i % 3 == 0 ? " about streams" : " about batches of rows"));
        }
        return prompts;
    }
}
