package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.operators.AbstractStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/** Creates a {@link GenerateOperator} per subtask; the engine itself is built later, in the operator's open(). */
@Internal
public final class GenerateOperatorFactory extends AbstractStreamOperatorFactory<Response>
        implements OneInputStreamOperatorFactory<GenerateRequest, Response> {
    private static final long serialVersionUID = 1L;

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;

    GenerateOperatorFactory(EngineFactory engineFactory, GenerateSettings settings) {
        this.engineFactory = engineFactory;
        this.settings = settings;
        setChainingStrategy(ChainingStrategy.ALWAYS);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T extends StreamOperator<Response>> T createStreamOperator(StreamOperatorParameters<Response> parameters) {
        return (T) new GenerateOperator(parameters, engineFactory, settings);
    }

    @Override
    public Class<? extends StreamOperator> getStreamOperatorClass(ClassLoader classLoader) {
        return GenerateOperator.class;
    }
}
