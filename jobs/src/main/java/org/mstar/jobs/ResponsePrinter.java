package org.mstar.jobs;

import java.io.PrintWriter;
import java.util.Locale;
import java.util.function.Consumer;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/**
 * Prints responses as they arrive. With one request in flight its text streams token by token; with several,
 * each text is printed whole when its request finishes, prefixed by the request's label. Usage and errors go to
 * the second stream.
 */
final class ResponsePrinter implements Consumer<Response> {
    private final PrintWriter out;
    private final PrintWriter info;
    private final boolean streaming;
    private int errors;

    ResponsePrinter(PrintWriter out, PrintWriter info, boolean streaming) {
        this.out = out;
        this.info = info;
        this.streaming = streaming;
    }

    @Override
    public void accept(Response response) {
        Object event = response.getEvent();
        if (event instanceof TokenEvent t) {
            if (streaming) {
                out.print(t.getTextDelta());
                out.flush();
            }
        } else if (event instanceof GenerateResult r) {
            out.println(streaming ? "" : "[" + r.getRequestId() + "] " + r.getText());
            info.printf(Locale.ROOT, "[%s] finish=%s prompt_tokens=%d completion_tokens=%d ttft=%.1fms itl=%.1fms%n",
                    r.getRequestId(), r.getFinishReason(), r.getUsage().getPromptTokens(),
                    r.getUsage().getCompletionTokens(), r.getTimings().getTimeToFirstTokenMs(),
                    r.getTimings().getMeanInterTokenMs());
            out.flush();
            info.flush();
        } else {
            ErrorEvent e = (ErrorEvent) event;
            errors++;
            info.printf(Locale.ROOT, "[%s] error %d: %s%n", e.getRequestId(), e.getCode(), e.getMessage());
            info.flush();
        }
    }

    /** How many responses were error events. */
    int errors() {
        return errors;
    }
}
