package org.mstar.sql;

import static org.mstar.sql.MstarModelOptions.*;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.table.api.ValidationException;
import org.mstar.flink.DeviceAssignment;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.constraint.OutputConstraint;

/**
 * The checked {@link MstarModelOptions} of one model: built where the query is planned, so a bad value fails the
 * {@code CREATE MODEL} or the query naming its key, and carried in the job graph to every subtask.
 */
final class ModelSettings implements Serializable {
    private static final long serialVersionUID = 1L;

    /** Exactly one of the two is set. */
    final String modelDir;
    final String randomConfig;
    final String device;
    final String gpuResource;
    final int maxTokens;
    final boolean chatTemplate;
    final boolean ignoreEos;
    final MstarModelOptions.OnError onError;
    private final double temperature;
    private final int topK;
    private final double topP;
    private final double minP;
    private final double repetitionPenalty;
    final long seed;
    private final String jsonSchema;
    private final String regex;
    /** The engine's options under the library's keys ({@link LlamaEngineOptions}), without the model folder. */
    private final Configuration engine;

    private ModelSettings(ReadableConfig o) {
        modelDir = o.getOptional(MODEL_DIR).orElse(null);
        randomConfig = o.getOptional(MODEL_RANDOM).orElse(null);
        if ((modelDir == null) == (randomConfig == null)) {
            throw new ValidationException("Set exactly one of '" + MODEL_DIR.key() + "' (a model folder) and '"
                    + MODEL_RANDOM.key() + "' ('tiny' or a config.json path for random weights).");
        }
        if (randomConfig != null && !randomConfig.equals(RandomModels.TINY) && !randomConfig.endsWith(".json")) {
            throw bad(MODEL_RANDOM, randomConfig, "expected 'tiny' or the path of a config.json");
        }
        try {
            device = DeviceAssignment.validate(o.get(DEVICE));
        } catch (IllegalArgumentException e) {
            throw bad(DEVICE, o.get(DEVICE), "expected cpu, cuda:N, a list such as cuda:0,cuda:1, or auto");
        }
        gpuResource = o.get(GPU_RESOURCE);
        maxTokens = positive(o, MAX_TOKENS);
        chatTemplate = o.get(CHAT_TEMPLATE);
        ignoreEos = o.get(IGNORE_EOS);
        onError = o.get(ON_ERROR);
        temperature = o.get(TEMPERATURE);
        topK = o.get(TOP_K);
        topP = o.get(TOP_P);
        minP = o.get(MIN_P);
        repetitionPenalty = o.get(REPETITION_PENALTY);
        seed = o.get(SEED);
        try {
            sampling(0).validate(null);
        } catch (RequestValidationException e) {
            throw new ValidationException("Invalid model option '" + e.field().replace('_', '-') + "': "
                    + e.getMessage());
        }
        jsonSchema = o.getOptional(JSON_SCHEMA).orElse(null);
        regex = o.getOptional(REGEX).orElse(null);
        if (jsonSchema != null && regex != null) {
            throw new ValidationException("Set at most one of '" + JSON_SCHEMA.key() + "' and '" + REGEX.key() + "'.");
        }
        OutputConstraints.check(constraint(), constraint() == null ? null : jsonSchema != null ? JSON_SCHEMA : REGEX);
        engine = engineConfig(o);
    }

    /** @throws ValidationException naming the option at fault */
    static ModelSettings from(ReadableConfig options) {
        return new ModelSettings(options);
    }

    /** The sampling of a row whose seed is {@code rowSeed}. */
    SamplingReqConfig sampling(long rowSeed) {
        SamplingReqConfig d = SamplingReqConfig.DEFAULTS;
        return new SamplingReqConfig(temperature, topK, topP, false, repetitionPenalty, minP, d.repetitionWindow(), 0,
                d.topPFirst(), d.topPMinKeep(), d.penalizePrompt(), rowSeed);
    }

    /** The structured-output constraint of every row, or null. */
    OutputConstraint constraint() {
        return jsonSchema != null ? OutputConstraint.jsonSchema(jsonSchema)
                : regex != null ? OutputConstraint.regex(regex) : null;
    }

    /** The engine factory ({@code engine.factory}) of the model in {@code folder}. */
    EngineFactory engineFactory(String folder) {
        Configuration config = new Configuration(engine);
        config.set(GenerateOptions.MODEL_DIR, folder);
        return EngineFactory.fromConfig(config, Thread.currentThread().getContextClassLoader());
    }

    private static Configuration engineConfig(ReadableConfig o) {
        Configuration c = new Configuration();
        c.set(GenerateOptions.ENGINE_FACTORY, o.get(ENGINE_FACTORY));
        // set only when given, so that a GPU sizes what is not
        setIfGiven(o, c, MAX_BATCH_ROWS, LlamaEngineOptions.MAX_BATCH_ROWS);
        setIfGiven(o, c, TOKEN_BUDGET, LlamaEngineOptions.TOKEN_BUDGET);
        setIfGiven(o, c, PAGES, LlamaEngineOptions.PAGES);
        double fraction = o.get(GPU_MEMORY_FRACTION);
        if (!(fraction > 0 && fraction <= 1)) {
            throw bad(GPU_MEMORY_FRACTION, fraction, "must be in (0, 1]");
        }
        c.set(LlamaEngineOptions.GPU_MEMORY_FRACTION, fraction);
        c.set(LlamaEngineOptions.MAX_SEQ_LEN, positive(o, MAX_SEQ_LEN));
        c.set(LlamaEngineOptions.PAGE_SIZE, positive(o, PAGE_SIZE));
        int offload = o.get(CPU_OFFLOAD_PAGES);
        if (offload < 0) {
            throw bad(CPU_OFFLOAD_PAGES, offload, "must be >= 0");
        }
        c.set(LlamaEngineOptions.CPU_OFFLOAD_PAGES, offload);
        c.set(LlamaEngineOptions.PREFIX_CACHE, o.get(PREFIX_CACHE));
        c.set(LlamaEngineOptions.DECODE_GRAPHS, o.get(DECODE_GRAPHS));
        c.set(LlamaEngineOptions.BATCH_INVARIANT, o.get(BATCH_INVARIANT));
        o.getOptional(ADAPTERS_DIR).ifPresent(dir -> c.set(LlamaEngineOptions.ADAPTERS_DIR, dir));
        c.set(LlamaEngineOptions.ADAPTER_SLOTS, positive(o, ADAPTER_SLOTS));
        // the engine's own checks of how the knobs combine, with a placeholder folder that is never read as a model
        Configuration check = new Configuration(c);
        check.set(GenerateOptions.MODEL_DIR, "");
        try {
            new LlamaEngineFactory(check);
        } catch (IllegalArgumentException e) {
            throw new ValidationException("Invalid engine options " + engineKeys() + ": " + e.getMessage(), e);
        }
        checkFactoryClass(o.get(ENGINE_FACTORY));
        return c;
    }

    /** Refuses, where the query is planned, a factory class that {@link EngineFactory#fromConfig} could not build. */
    private static void checkFactoryClass(String className) {
        try {
            Class.forName(className, false, Thread.currentThread().getContextClassLoader())
                    .asSubclass(EngineFactory.class).getConstructor(ReadableConfig.class);
        } catch (ReflectiveOperationException | ClassCastException | LinkageError e) {
            throw bad(ENGINE_FACTORY, className, "not an EngineFactory with a public (ReadableConfig) constructor");
        }
    }

    private static void setIfGiven(ReadableConfig o, Configuration c, ConfigOption<Integer> option,
            ConfigOption<Integer> libraryOption) {
        if (o.getOptional(option).isPresent()) {
            c.set(libraryOption, positive(o, option));
        }
    }

    private static List<String> engineKeys() {
        List<String> keys = new ArrayList<>();
        for (ConfigOption<?> option : List.of(MAX_BATCH_ROWS, TOKEN_BUDGET, MAX_SEQ_LEN, PAGES, PAGE_SIZE,
                CPU_OFFLOAD_PAGES)) {
            keys.add(option.key());
        }
        return keys;
    }

    private static int positive(ReadableConfig o, ConfigOption<Integer> option) {
        int value = o.get(option);
        if (value < 1) {
            throw bad(option, value, "must be >= 1");
        }
        return value;
    }

    static ValidationException bad(ConfigOption<?> option, Object value, String why) {
        return new ValidationException("Invalid model option '" + option.key() + "' = '" + value + "': " + why + ".");
    }
}
