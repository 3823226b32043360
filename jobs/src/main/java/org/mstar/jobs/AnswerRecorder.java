package org.mstar.jobs;

/**
 * The {@link ServingTrace} of a row a {@link BenchServingSide} serves: every request sent at one time, each answered
 * whole. Called from the side's one reading thread.
 */
final class AnswerRecorder implements BenchServingSide.Recorder {
    private final ServingLoad load;
    private ServingTrace trace;

    AnswerRecorder(ServingLoad load) {
        this.load = load;
    }

    @Override
    public void sent(long nanos) {
        trace = new ServingTrace(load, nanos);
        for (int i = 0; i < load.requests().size(); i++) {
            trace.arrived(i, nanos);
        }
    }

    @Override
    public void answered(int index, int outputTokens, long nanos) {
        if (trace == null) {
            throw new IllegalStateException("an answer before the requests were sent");
        }
        trace.answered(index, outputTokens, nanos);
    }

    /** @throws IllegalStateException when the side returned without every request answered */
    ServingTrace trace() {
        if (trace == null || trace.finished() != load.requests().size()) {
            throw new IllegalStateException(load.name() + ": " + (trace == null ? 0 : trace.finished()) + " of "
                    + load.requests().size() + " requests answered");
        }
        return trace;
    }
}
