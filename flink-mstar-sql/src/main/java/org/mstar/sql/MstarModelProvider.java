package org.mstar.sql;

import org.apache.flink.annotation.Internal;
import org.apache.flink.table.functions.AsyncPredictFunction;
import org.apache.flink.table.ml.AsyncPredictRuntimeProvider;

/**
 * The runtime of one {@code 'provider' = 'mstar'} model: an async predict function only, since rows share the engine's
 * steps only while several are pending at once (a query's {@code MAP['async', 'false']} is refused by the planner).
 */
@Internal
public final class MstarModelProvider implements AsyncPredictRuntimeProvider {
    /** Not opened here: each subtask opens its own deserialized copy. */
    private final ModelRuntime runtime;

    MstarModelProvider(ModelRuntime runtime) {
        this.runtime = runtime;
    }

    @Override
    public AsyncPredictFunction createAsyncPredictFunction(Context context) {
        return new MstarAsyncPredictFunction(runtime);
    }

    /** Immutable until a subtask opens its copy of the runtime: the copy shares it. */
    @Override
    public MstarModelProvider copy() {
        return new MstarModelProvider(runtime);
    }
}
