package org.mstar.jobs;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;

/**
 * The fastest a device could serve an offline load at an engine's size, from two measured rates: the steps an ideal
 * scheduler would run (every running request decodes each step; waiting prompts fill the rest of the token budget
 * in arrival order; a request is admitted while a row is free and the KV pool holds its whole sequence, so nothing
 * is preempted), each costing its matmuls at the longer of (weight bytes / bandwidth, matmul FLOPs of every token /
 * GEMM rate) plus attention at (KV bytes read / bandwidth). Attention FLOPs and every other kernel are left out, so
 * the ceiling is above what any engine reaches.
 *
 * @param bytesPerSecond the device's measured copy bandwidth
 * @param flopsPerSecond the device's measured bf16 GEMM rate
 */
record ServingCeiling(ModelConfig model, int rows, int tokenBudget, long kvTokens, int pageSize,
                      double bytesPerSecond, double flopsPerSecond) {
    /** A request while it runs. */
    private static final class Running {
        final int prompt;
        final long kvPages;
        int prefilled;
        int toGenerate;
        /** Tokens in the KV cache once decoding. */
        int context;
        boolean decoding;

        Running(ServingLoad.Request r, int pageSize) {
            prompt = r.promptLen();
            toGenerate = r.outputLen();
            kvPages = (r.promptLen() + r.outputLen() + pageSize - 1) / pageSize;
        }
    }

    /** Seconds the device needs at least for {@code load}. */
    double seconds(ServingLoad load) {
        Deque<ServingLoad.Request> waiting = new ArrayDeque<>(load.requests());
        List<Running> running = new ArrayList<>();
        long kvPages = kvTokens / pageSize;
        long pagesUsed = 0;
        double kvPerToken = ModelCost.kvBytesPerToken(model);
        double total = 0;
        while (!waiting.isEmpty() || !running.isEmpty()) {
            while (!waiting.isEmpty() && running.size() < rows) {
                Running r = new Running(waiting.peek(), pageSize);
                if (pagesUsed + r.kvPages > kvPages) {
                    if (running.isEmpty()) {
                        throw new IllegalArgumentException("a request of " + (r.prompt + r.toGenerate)
                                + " tokens does not fit a KV pool of " + kvTokens + " tokens");
                    }
                    break;
                }
                waiting.poll();
                running.add(r);
                pagesUsed += r.kvPages;
            }
            long tokens = 0;
            long sampled = 0;
            double keysRead = 0;
            for (Running r : running) {
                if (r.decoding) {
                    tokens++;
                    sampled++;
                    keysRead += r.context + 1;
                }
            }
            long budget = tokenBudget - tokens;
            List<Running> prefillDone = new ArrayList<>();
            for (Running r : running) {
                if (!r.decoding && budget > 0) {
                    int chunk = (int) Math.min(budget, r.prompt - r.prefilled);
                    budget -= chunk;
                    tokens += chunk;
                    r.prefilled += chunk;
                    keysRead += r.prefilled; // the chunk reads its cached prefix and its own keys once
                    if (r.prefilled == r.prompt) {
                        sampled++; // the prompt's last chunk samples the first token
                        prefillDone.add(r);
                    }
                }
            }
            // a mixture of experts reads the experts this step's rows are routed to, a dense model every weight
            double weightSeconds = ModelCost.weightBytesRead(model, tokens) / bytesPerSecond;
            double matmul = Math.max(weightSeconds, ModelCost.flops(model, tokens, sampled, 0) / flopsPerSecond);
            total += matmul + keysRead * kvPerToken / bytesPerSecond;
            for (Iterator<Running> it = running.iterator(); it.hasNext(); ) {
                Running r = it.next();
                if (r.decoding) {
                    r.context++;
                    r.toGenerate--;
                } else if (prefillDone.contains(r)) {
                    r.decoding = true;
                    r.context = r.prompt;
                    r.toGenerate--;
                }
                if (r.decoding && r.toGenerate <= 0) {
                    pagesUsed -= r.kvPages;
                    it.remove();
                }
            }
        }
        return total;
    }

    /** Output tokens per second at best. */
    double outputTokensPerSecond(ServingLoad load) {
        return load.outputTokens() / seconds(load);
    }
}
