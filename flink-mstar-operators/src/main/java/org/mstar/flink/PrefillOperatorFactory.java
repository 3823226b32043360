package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.operators.StreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/** Creates a {@link PrefillOperator} per subtask. */
@Internal
public final class PrefillOperatorFactory extends EngineOperatorFactory<GenerateRequest> {
    private static final long serialVersionUID = 1L;

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;
    private final int maxRecordBytes;

    PrefillOperatorFactory(EngineFactory engineFactory, GenerateSettings settings, int maxRecordBytes) {
        super(PrefillOperator.class);
        this.engineFactory = engineFactory;
        this.settings = settings;
        this.maxRecordBytes = maxRecordBytes;
    }

    @Override
    StreamOperator<Response> create(StreamOperatorParameters<Response> parameters) {
        return new PrefillOperator(parameters, engineFactory, settings, maxRecordBytes);
    }
}
