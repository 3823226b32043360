package org.mstar.device.cpu;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.IntConsumer;

/** Splits an index range over a fixed pool of daemon threads; small ranges run inline. */
final class ParallelLoop implements AutoCloseable {
    /** Below this much work (index count × cost per index) threads cost more than they save. */
    private static final long MIN_PARALLEL_WORK = 1 << 15;
    /** Chunks per thread: a few, so uneven indices (long and short sequences) still balance. */
    private static final int CHUNKS_PER_THREAD = 4;

    /** A contiguous run of indices {@code [from, to)} handled by one thread. */
    @FunctionalInterface
    interface Range {
        void run(int from, int to);
    }

    private final int threads;
    private final ExecutorService pool;

    ParallelLoop(int threads) {
        this.threads = Math.max(1, threads);
        this.pool = this.threads == 1 ? null : Executors.newFixedThreadPool(this.threads, r -> {
            Thread t = new Thread(r, "mstar-cpu-op");
            t.setDaemon(true);
            return t;
        });
    }

    /** Run {@code body} for every index in [0, n); {@code costPerIndex} estimates work per index. */
    void forEach(int n, long costPerIndex, IntConsumer body) {
        forChunks(n, costPerIndex, (from, to) -> {
            for (int i = from; i < to; i++) {
                body.accept(i);
            }
        });
    }

    /**
     * Cover [0, n) with a few contiguous chunks per thread, so a body can allocate its scratch buffers
     * once per chunk instead of once per index.
     */
    void forChunks(int n, long costPerIndex, Range body) {
        if (n <= 0) {
            return;
        }
        if (pool == null || n < 2 || (long) n * costPerIndex < MIN_PARALLEL_WORK) {
            body.run(0, n);
            return;
        }
        int chunks = (int) Math.min(n, (long) threads * CHUNKS_PER_THREAD);
        List<Future<?>> futures = new ArrayList<>(chunks);
        for (int c = 0; c < chunks; c++) {
            int from = (int) ((long) n * c / chunks);
            int to = (int) ((long) n * (c + 1) / chunks);
            futures.add(pool.submit(() -> body.run(from, to)));
        }
        for (Future<?> f : futures) {
            try {
                f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted inside a CPU op", e);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof RuntimeException re) {
                    throw re;
                }
                throw new IllegalStateException(e.getCause());
            }
        }
    }

    @Override
    public void close() {
        if (pool != null) {
            pool.shutdownNow();
        }
    }
}
