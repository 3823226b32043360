package org.mstar.engine;

import java.util.Map;
import java.util.Set;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Accepts a step's drawn tokens into its requests: their progress, the prefix chain, the stop rules and
 * structured output, and the events each token becomes (a token, a finished request, a prefill hand-off). A
 * {@link ModelRequest} decides its own ends instead of the stop rules, may take a row's logits instead of a token,
 * and moves to its next sequence when one ends.
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
    /** Null unless decode graphs and pre-planning are on. */
    private final DecodePreplan preplan;

    TokenAcceptor(Map<String, LiveRequest> live, EngineCounters counters, RequestResources resources,
                  StopRule stopRule, EngineRole role, HandoffExchange exchange, TextTokenizer tokenizer,
                  DecodePreplan preplan) {
        this.live = live;
        this.counters = counters;
        this.resources = resources;
        this.stopRule = stopRule;
        this.role = role;
        this.exchange = exchange;
        this.tokenizer = tokenizer;
        this.preplan = preplan;
    }

    /**
     * Accept each row's token of step {@code stepNo} (or, for a row that yields its logits, {@code hostLogits} in
     * order); requests that finish go to {@code done} (the caller removes them).
     */
    void acceptRows(PlannedStep p, int[] drawn, float[][] hostLogits, long stepNo, StepOutputs out,
                    Set<String> done) {
        long now = System.nanoTime();
        int s = 0;
        int h = 0;
        for (BatchRow row : p.rows()) {
            LiveRequest r = row.request();
            ModelRequest.Yield kind = row.samples() ? r.yieldAtEnd() : ModelRequest.Yield.NOTHING;
            if (live.get(r.id()) != r) {
                s += kind == ModelRequest.Yield.TOKEN ? 1 : 0; // removed since its step launched
                h += kind == ModelRequest.Yield.LOGITS ? 1 : 0;
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
            if (!row.samples()) {
                continue;
            }
            boolean finished = switch (kind) {
                case TOKEN -> accept(r, drawn[s++], now, out);
                case LOGITS -> {
                    r.addKnown(r.program.takeLogits(hostLogits[h++]));
                    resources.restoreSampler(r);
                    yield false;
                }
                case NOTHING -> endSequence(r, out);
            };
            if (finished) {
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
        FinishReason finish = r.program != null ? r.program.accept(token, r.generated.size())
                : stopRule.check(r, token);
        if (finish == null && resources.constraintComplete(r)) {
            finish = FinishReason.STOP; // structured output complete: nothing else may follow
        }
        if (finish == null && r.program != null && r.program.sequenceEnded()) {
            finish = r.program.endSequence();
        }
        out.tokens.add(r.output(token, finish));
        if (finish == null && role == EngineRole.PREFILL) {
            out.handoffs.add(exchange.publish(r));
            return true;
        } else if (finish != null) {
            out.finished.add(r.finished(finish, tokenizer));
            return true;
        }
        if (r.program != null && r.program.sequenceEnded()) {
            nextSequence(r);
        }
        return false;
    }

    /**
     * {@code r}'s sequence ended and another follows: it starts from no KV, as a preempted request recomputes,
     * its known tokens output without events.
     */
    private void nextSequence(LiveRequest r) {
        if (preplan != null) {
            preplan.forget(r);
        }
        r.addKnown(r.program.nextSequence());
        resources.recompute(r);
    }

    /** A row that fed the last known tokens of {@code r}'s sequence: the request finishes, or its next starts. */
    private boolean endSequence(LiveRequest r, StepOutputs out) {
        FinishReason finish = r.program.endSequence();
        if (finish != null) {
            out.finished.add(r.finished(finish, tokenizer));
            return true;
        }
        nextSequence(r);
        return false;
    }
}
