package org.mstar.flink.frame;

import org.apache.flink.streaming.api.operators.AbstractStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.FrameRequest;
import org.mstar.schemas.FrameResponse;

/** Creates a {@link FrameSessionOperator} per subtask; its engine is built in the operator's open(). */
public final class FrameSessionOperatorFactory extends AbstractStreamOperatorFactory<FrameResponse>
        implements OneInputStreamOperatorFactory<FrameRequest, FrameResponse> {
    private static final long serialVersionUID = 1L;

    private final FrameEngineFactory engineFactory;
    private final String device;

    public FrameSessionOperatorFactory(FrameEngineFactory engineFactory, String device) {
        this.engineFactory = engineFactory;
        this.device = device;
        setChainingStrategy(ChainingStrategy.ALWAYS);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T extends StreamOperator<FrameResponse>> T createStreamOperator(StreamOperatorParameters<FrameResponse> parameters) {
        return (T) new FrameSessionOperator(parameters, engineFactory, device);
    }

    @Override
    public Class<? extends StreamOperator> getStreamOperatorClass(ClassLoader classLoader) {
        return FrameSessionOperator.class;
    }
}
