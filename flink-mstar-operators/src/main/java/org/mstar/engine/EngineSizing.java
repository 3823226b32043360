package org.mstar.engine;

import java.util.Locale;
import java.util.OptionalInt;

/**
 * How large an engine on a GPU is made: batch rows, the prefill token budget and the KV pool, from the device's
 * memory after the weights. The KV pool takes what is left of {@code memoryFraction} of the device once the
 * weights, everything else already on it and the measured activation reserve (a forward at the token budget, the
 * decode graphs at the row cap) are counted, as vLLM's {@code gpu_memory_utilization} does. Explicit values win.
 *
 * @param maxBatchRows most requests in one step
 * @param tokenBudget most tokens in one step
 * @param pages KV pages, each of {@code pageSize} tokens
 * @param reason what the numbers came from, for the running line
 */
public record EngineSizing(int maxBatchRows, int tokenBudget, int pages, String reason) {
    /** Rows of a GPU engine of less than {@link #LARGE_GPU_BYTES} unless set. */
    public static final int GPU_ROWS = 256;
    /** Tokens of a GPU step unless set: enough prefill to keep the tensor cores busy beside 256 decodes. */
    public static final int GPU_TOKEN_BUDGET = 8192;
    /**
     * From this much device memory (an 80 GB H100 up) rows and budget default to {@link #LARGE_GPU_ROWS} and
     * {@link #LARGE_GPU_TOKEN_BUDGET}, as vLLM's do there: the matmuls of a decode step of many rows run nearer
     * their rate (an 8B model on an H100: the chat mix 22 % faster than at 256 rows and 8192 tokens, 2026-12-06).
     */
    public static final long LARGE_GPU_BYTES = 70L << 30;
    public static final int LARGE_GPU_ROWS = 1024;
    public static final int LARGE_GPU_TOKEN_BUDGET = 16384;
    /** Default share of the device the engine may fill. */
    public static final double DEFAULT_MEMORY_FRACTION = 0.9;

    /**
     * What the user set; empty values are sized.
     *
     * @param memoryFraction share of the device's total memory this process may use, weights included
     */
    public record Request(OptionalInt maxBatchRows, OptionalInt tokenBudget, OptionalInt pages, double memoryFraction) {
        public Request {
            if (!(memoryFraction > 0 && memoryFraction <= 1)) {
                throw new IllegalArgumentException("the GPU memory fraction must be in (0, 1], not " + memoryFraction);
            }
        }

        /** From values that are null where not set. */
        public static Request of(Integer maxBatchRows, Integer tokenBudget, Integer pages, double memoryFraction) {
            return new Request(optional(maxBatchRows), optional(tokenBudget), optional(pages), memoryFraction);
        }

        private static OptionalInt optional(Integer value) {
            return value == null ? OptionalInt.empty() : OptionalInt.of(value);
        }

        /** Nothing set: everything sized, at the default fraction. */
        public static Request sizedByDevice() {
            return new Request(OptionalInt.empty(), OptionalInt.empty(), OptionalInt.empty(), DEFAULT_MEMORY_FRACTION);
        }
    }

    /**
     * The device's side of the arithmetic, all in bytes.
     *
     * @param totalBytes the device's memory
     * @param usedBytes in use before the KV pool: weights, other processes, this process's workspaces
     * @param weightBytes the model's weights (part of {@code usedBytes}; named in the reason only)
     * @param reserveBytes activations and decode graphs, measured
     * @param pageBytes one KV page over all layers, keys and values
     * @param pageSize tokens per page
     * @param kvShare the part of the room left this engine's pool takes: 1, or 1/n when n engines of the job are
     *                still to be built on this device (prefill and decode of a disaggregated job on one GPU)
     */
    public record Device(long totalBytes, long usedBytes, long weightBytes, long reserveBytes, long pageBytes,
                         int pageSize, double kvShare) {}

    /**
     * @throws IllegalStateException when the fraction leaves no room for a KV pool, naming the numbers
     */
    public static EngineSizing size(Request request, Device d) {
        int rows = rows(request, d.totalBytes());
        int budget = tokenBudget(request, d.totalBytes());
        long allowed = (long) (request.memoryFraction() * d.totalBytes());
        long forKv = allowed - d.usedBytes() - d.reserveBytes();
        String memory = String.format(Locale.ROOT, "%s of %s: %s in use (weights %s), activation reserve %s",
                percent(request.memoryFraction()), gib(d.totalBytes()), gib(d.usedBytes()), gib(d.weightBytes()),
                gib(d.reserveBytes()));
        int pages;
        if (request.pages().isPresent()) {
            pages = request.pages().getAsInt();
        } else {
            long fit = (long) (forKv * d.kvShare()) / d.pageBytes();
            // page 0 is reserved, so one page holds nothing
            if (fit < 2) {
                throw new IllegalStateException("no room for a KV cache on the device: " + memory + " leave "
                        + gib(forKv) + " (raise mstar.engine.gpu-memory-fraction, or set mstar.kv.pages)");
            }
            pages = (int) Math.min(Integer.MAX_VALUE, fit);
        }
        String reason = String.format(Locale.ROOT, "%s; KV %s %d pages = %d tokens (%s, %d bytes a token)%s", memory,
                request.pages().isPresent() ? "set to" : "sized to", pages, (long) pages * d.pageSize(),
                gib((long) pages * d.pageBytes()), d.pageBytes() / d.pageSize(),
                request.maxBatchRows().isPresent() || request.tokenBudget().isPresent() ? "; rows or budget set" : "")
                + (d.kvShare() < 1 && request.pages().isEmpty() ? String.format(Locale.ROOT,
                        "; %.0f %% of the room left, the rest for the other engines of the job on this device",
                        100 * d.kvShare()) : "");
        return new EngineSizing(rows, budget, pages, reason);
    }

    /** Rows of the largest decode graph an engine of this size records (with decode graphs on). */
    public int largestDecodeGraph() {
        return DecodeGraphs.largestBucket(maxBatchRows);
    }

    /** Rows of an engine on a GPU of {@code totalBytes}: as set, else {@link #GPU_ROWS} or {@link #LARGE_GPU_ROWS}. */
    public static int rows(Request request, long totalBytes) {
        return request.maxBatchRows().orElse(totalBytes >= LARGE_GPU_BYTES ? LARGE_GPU_ROWS : GPU_ROWS);
    }

    /**
     * Token budget of an engine on a GPU of {@code totalBytes}: as set, else {@link #GPU_TOKEN_BUDGET} or
     * {@link #LARGE_GPU_TOKEN_BUDGET} (at least one token a row).
     */
    public static int tokenBudget(Request request, long totalBytes) {
        int budget = totalBytes >= LARGE_GPU_BYTES ? LARGE_GPU_TOKEN_BUDGET : GPU_TOKEN_BUDGET;
        return request.tokenBudget().orElse(Math.max(budget, rows(request, totalBytes)));
    }

    private static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.1f GiB", bytes / (double) (1L << 30));
    }

    private static String percent(double fraction) {
        return String.format(Locale.ROOT, "%.0f %%", 100 * fraction);
    }
}
