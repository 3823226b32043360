package org.mstar.jobs;

import java.util.concurrent.ExecutionException;
import org.apache.flink.core.execution.JobClient;

/** Ends a test's job before the test's folder is deleted. */
final class CancelledJobs {
    private CancelledJobs() {}

    /**
     * Cancels the job and waits until it has ended: the cancel call returns once the request is accepted, while
     * tasks may still write checkpoint files into the test's folder (a temporary folder that then fails to delete).
     */
    static void cancel(JobClient client) throws Exception {
        client.cancel().get();
        try {
            client.getJobExecutionResult().get();
        } catch (ExecutionException cancelled) {
            // what a cancelled job's result is
        }
    }
}
