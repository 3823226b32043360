package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.operators.AbstractStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.Response;

/** Creates a {@link DecodeOperator} per subtask; its engine is built in the operator's open(). */
@Internal
public final class DecodeOperatorFactory extends AbstractStreamOperatorFactory<Response>
        implements OneInputStreamOperatorFactory<KvHandoff, Response> {
    private static final long serialVersionUID = 1L;

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;

    DecodeOperatorFactory(EngineFactory engineFactory, GenerateSettings settings) {
        this.engineFactory = engineFactory;
        this.settings = settings;
        setChainingStrategy(ChainingStrategy.ALWAYS);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T extends StreamOperator<Response>> T createStreamOperator(StreamOperatorParameters<Response> parameters) {
        return (T) new DecodeOperator(parameters, engineFactory, settings);
    }

    @Override
    public Class<? extends StreamOperator> getStreamOperatorClass(ClassLoader classLoader) {
        return DecodeOperator.class;
    }
}
