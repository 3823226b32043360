package org.mstar.engine;

import java.util.Map;
import java.util.Set;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Accepts a step's drawn tokens into its requests: their progress, the prefix chain, the stop rules and
 * structured output, and the events each token becomes (a token, a finished request, a prefill hand-off).
 */
final class TokenAcceptor {
    private final Map<String, LiveRequest> live;
    private final EngineCounters counters;
    private final RequestResources resources;
    private final StopRule stopRule;
    private final EngineRole role;
    /** Null for a colocated engine. */
    private final HandoffExchange exchange;
    /** Null when requests always carry token ids. */
    private final TextTokenizer tokenizer;

    TokenAcceptor(Map<String, LiveRequest> live, EngineCounters counters, RequestResources resources,
                  StopRule stopRule, EngineRole role, HandoffExchange exchange, TextTokenizer tokenizer) {
        this.live = live;
        this.counters = counters;
        this.resources = resources;
        this.stopRule = stopRule;
        this.role = role;
        this.exchange = exchange;
        this.tokenizer = tokenizer;
    }

    /**
     * Accept each row's token of step {@code stepNo}; requests that finish go to {@code done} (the caller
     * removes them).
     */
    void acceptRows(PlannedStep p, int[] drawn, long stepNo, StepOutputs out, Set<String> done) {
        long now = System.nanoTime();
        int s = 0;
        for (BatchRow row : p.rows()) {
            LiveRequest r = row.request();
            if (live.get(r.id()) != r) {
                s += row.samples() ? 1 : 0; // removed since its step launched
                continue;
            }
            if (r.status == RequestStatus.WAITING) {
                r.status = RequestStatus.RUNNING;
                if (r.firstScheduledNanos < 0) {
                    r.firstScheduledNanos = now;
                }
            }
            r.promptTracked = true;
            r.computed += row.span();
            r.lastActiveStep = stepNo;
            if (row.samples() && accept(r, drawn[s++], now, out)) {
                done.add(r.id());
            }
        }
    }

    /** Whether {@code r} is done after {@code token} (finished, or handed off by a prefill engine). */
    private boolean accept(LiveRequest r, int token, long now, StepOutputs out) {
        r.generated.add(token);
        counters.generatedTokens++;
        r.recordToken(now);
        resources.extendPrefix(r, token);
        FinishReason finish = stopRule.check(r, token);
        if (finish == null && resources.constraintComplete(r)) {
            finish = FinishReason.STOP; // structured output complete: nothing else may follow
        }
        out.tokens.add(r.output(token, finish));
        if (finish == null && role == EngineRole.PREFILL) {
            out.handoffs.add(exchange.publish(r));
            return true;
        } else if (finish != null) {
            out.finished.add(r.finished(finish, tokenizer));
            return true;
        }
        return false;
    }
}
