package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.Response;

/** Creates a {@link DecodeOperator} per subtask. */
@Internal
public final class DecodeOperatorFactory extends EngineOperatorFactory<KvHandoff> {
    private static final long serialVersionUID = 1L;

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;

    DecodeOperatorFactory(EngineFactory engineFactory, GenerateSettings settings) {
        super(DecodeOperator.class);
        this.engineFactory = engineFactory;
        this.settings = settings;
    }

    @Override
    StreamOperator<Response> create(StreamOperatorParameters<Response> parameters) {
        return new DecodeOperator(parameters, engineFactory, settings);
    }
}
