package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.operators.AbstractStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/** Creates a {@link PrefillOperator} per subtask; its engine is built in the operator's open(). */
@Internal
public final class PrefillOperatorFactory extends AbstractStreamOperatorFactory<Response>
        implements OneInputStreamOperatorFactory<GenerateRequest, Response> {
    private static final long serialVersionUID = 1L;

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;
    private final int maxRecordBytes;

    PrefillOperatorFactory(EngineFactory engineFactory, GenerateSettings settings, int maxRecordBytes) {
        this.engineFactory = engineFactory;
        this.settings = settings;
        this.maxRecordBytes = maxRecordBytes;
        setChainingStrategy(ChainingStrategy.ALWAYS);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T extends StreamOperator<Response>> T createStreamOperator(StreamOperatorParameters<Response> parameters) {
        return (T) new PrefillOperator(parameters, engineFactory, settings, maxRecordBytes);
    }

    @Override
    public Class<? extends StreamOperator> getStreamOperatorClass(ClassLoader classLoader) {
        return PrefillOperator.class;
    }
}
