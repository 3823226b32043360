package org.mstar.sql;

import java.util.Collection;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.annotation.Internal;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.functions.AsyncPredictFunction;
import org.apache.flink.table.functions.FunctionContext;

/**
 * {@code ML_PREDICT} with the async operator (the planner's default for this provider): every row Flink has in flight
 * ({@code 'max-concurrent-operations'}) waits in the engine at once, so they share its steps; the operator checkpoints
 * the rows in flight and re-runs them after a restore.
 */
@Internal
public final class MstarAsyncPredictFunction extends AsyncPredictFunction {
    private static final long serialVersionUID = 1L;

    private final ModelRuntime runtime;

    MstarAsyncPredictFunction(ModelRuntime runtime) {
        this.runtime = runtime;
    }

    @Override
    public void open(FunctionContext context) throws Exception {
        super.open(context);
        runtime.open(context);
    }

    @Override
    public CompletableFuture<Collection<RowData>> asyncPredict(RowData inputRow) {
        return runtime.predict(inputRow);
    }

    @Override
    public void close() throws Exception {
        runtime.close();
        super.close();
    }
}
