package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/** Creates a {@link GenerateOperator} per subtask. */
@Internal
public final class GenerateOperatorFactory extends EngineOperatorFactory<GenerateRequest> {
    private static final long serialVersionUID = 1L;

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;

    GenerateOperatorFactory(EngineFactory engineFactory, GenerateSettings settings) {
        super(GenerateOperator.class);
        this.engineFactory = engineFactory;
        this.settings = settings;
    }

    /** The factory for {@code engineFactory}'s engines configured by {@code config} ({@link GenerateOptions}), for tools. */
    public static GenerateOperatorFactory of(EngineFactory engineFactory, ReadableConfig config) {
        return new GenerateOperatorFactory(engineFactory, GenerateSettings.from(config));
    }

    @Override
    StreamOperator<Response> create(StreamOperatorParameters<Response> parameters) {
        return new GenerateOperator(parameters, engineFactory, settings);
    }
}
