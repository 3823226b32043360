package org.mstar.jobs;

import java.io.PrintStream;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.RequestFailure;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;

/** The local commands' loop: step an engine holding one request, printing its text as it is generated. */
final class StreamedRun {
    private StreamedRun() {}

    /**
     * @return the finished request, or null when the engine failed it (the error is printed to stderr)
     */
    static FinishedRequest toEnd(GenerationEngine engine, PrintStream out) {
        FinishedRequest done = null;
        while (engine.hasWork()) {
            StepResult r = engine.step();
            for (TokenOutput t : r.tokens()) {
                out.print(t.textDelta());
                out.flush();
            }
            for (RequestFailure f : r.failures()) {
                System.err.println("\nerror " + f.code() + ": " + f.message());
                return null;
            }
            if (!r.finished().isEmpty()) {
                done = r.finished().get(0);
            }
        }
        out.println();
        return done;
    }
}
