package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.operators.AbstractStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.Response;

/**
 * What the factories of the engine operators share: one operator per subtask, chained where Flink can, whose
 * engine is built later, in the operator's open().
 */
@Internal
abstract class EngineOperatorFactory<IN> extends AbstractStreamOperatorFactory<Response>
        implements OneInputStreamOperatorFactory<IN, Response> {
    private static final long serialVersionUID = 1L;

    private final Class<? extends StreamOperator> operatorClass;

    EngineOperatorFactory(Class<? extends StreamOperator> operatorClass) {
        this.operatorClass = operatorClass;
        setChainingStrategy(ChainingStrategy.ALWAYS);
    }

    /** A new operator for the subtask {@code parameters} describe. */
    abstract StreamOperator<Response> create(StreamOperatorParameters<Response> parameters);

    @Override
    @SuppressWarnings("unchecked")
    public final <T extends StreamOperator<Response>> T createStreamOperator(StreamOperatorParameters<Response> parameters) {
        return (T) create(parameters);
    }

    @Override
    public final Class<? extends StreamOperator> getStreamOperatorClass(ClassLoader classLoader) {
        return operatorClass;
    }
}
