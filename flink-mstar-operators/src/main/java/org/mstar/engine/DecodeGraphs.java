package org.mstar.engine;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceGraph;
import org.mstar.device.Tensor;
import org.mstar.resources.BucketKey;
import org.mstar.resources.SlotLease;

/**
 * Decode steps replayed as one device graph per batch bucket: powers of two up to {@value #FINE_FROM} rows, then
 * every multiple of {@value #FINE_FROM}/2 up to {@value #COARSE_FROM}, then every multiple of
 * {@value #COARSE_FROM}/2, up to the engine's batch rows rounded up so, at most {@value #MAX_BUCKET}. A decode
 * batch is padded to its bucket; the bucket's forward (embedding to every row's logits) is recorded on its first
 * step and replayed afterwards, so a step costs one launch instead of a few hundred. The resources plan a leased
 * step into static buffers of (bucket, slot 0, label) before the replay; one slot suffices because plan uploads
 * and replays are ordered on the device's one stream. For the same reason every bucket writes its fp32 logits
 * into the leading rows of one buffer: a step's draw reads them before the next replay can overwrite them. A bucket
 * records one graph per variant of the forward its steps need ({@link ModelRunner#graphVariant}): the Llama
 * runner's steps with adapter rows run other ops than those without.
 */
final class DecodeGraphs implements AutoCloseable {
    private static final int SLOT = 0;
    /**
     * Largest bucket. A bucket holds its forward's temporaries while the engine lives (about 40 MB at 256 rows of
     * Llama-3-8B's geometry), and all share the logits of the largest (1024 x 128256 x 4 bytes there).
     */
    static final int MAX_BUCKET = 1024;
    /**
     * Above this many rows buckets step by half of it, not double: a padding row costs as much matmul as a real
     * one, and from about a hundred rows an 8B model's decode step is bound by matmul rate, so 129 rows padded
     * to 256 would run near twice the work.
     */
    static final int FINE_FROM = 64;
    /** Above this many rows buckets step by half of it: a tenth of padding at most, in fewer graphs. */
    static final int COARSE_FROM = 256;

    private final ModelRunner model;
    private final int maxBucket;
    private final Map<BucketVariant, Bucket> buckets = new HashMap<>();
    /** The largest bucket's logits, whose leading rows every bucket writes; null before the first bucket. */
    private Tensor logits;
    private long replays;

    DecodeGraphs(ModelRunner model, int maxBatchRows) {
        this.model = model;
        this.maxBucket = largestBucket(maxBatchRows);
    }

    /** The largest bucket an engine of {@code maxBatchRows} records. */
    static int largestBucket(int maxBatchRows) {
        // padding rows take no KV pages, so the last bucket may exceed the batch rows
        return Math.min(MAX_BUCKET, bucketAtLeast(maxBatchRows));
    }

    /** Device bytes of the logits all buckets up to {@code largest} share. */
    static long logitsBytes(int largest, int vocabSize) {
        return (long) Float.BYTES * largest * vocabSize;
    }

    /** Rows of all the buckets smaller than {@code largest} together, for the device memory their graphs hold. */
    static int rowsOfSmallerBuckets(int largest) {
        int rows = 0;
        for (int bs = 1; bs < largest; bs = bucketAtLeast(bs + 1)) {
            rows += bs;
        }
        return rows;
    }

    /** The bucket a decode batch of {@code rows} pads to; 0 when it is too large for any (it runs eagerly). */
    int bucketFor(int rows) {
        int bs = bucketAtLeast(rows);
        return rows >= 1 && bs <= maxBucket ? bs : 0;
    }

    private static int bucketAtLeast(int n) {
        if (n > FINE_FROM) {
            int step = n > COARSE_FROM ? COARSE_FROM / 2 : FINE_FROM / 2;
            return (n + step - 1) / step * step;
        }
        return Integer.highestOneBit(n) == n ? n : Integer.highestOneBit(n) << 1;
    }

    /** What the resources plan a step of {@code walk} padded to {@code bs} rows into. */
    static SlotLease lease(String walk, int bs) {
        return new SlotLease(SLOT, new BucketKey(walk, bs, bs));
    }

    /**
     * Runs the planned step of {@code tokens} (its real rows' tokens, padding rows feed token 0) padded to
     * {@code bs} rows. Returns the bucket's logits {@code [bs, vocab]}, real rows first; they stay valid
     * until the next step of any bucket (work enqueued before it reads them in time).
     */
    Tensor forward(int bs, int[] tokens) {
        Bucket b = bucket(bs);
        ByteBuffer bytes = ByteBuffer.allocate(bs * Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        bytes.asIntBuffer().put(tokens);
        model.device().copyFromHost(bytes, b.tokens);
        return replay(b);
    }

    /**
     * {@link #forward} of a step whose tokens the device drew and the host has not read: real row i feeds
     * {@code drawn[from[i]]}, copied on the device. Padding rows keep the token they last fed (an id in the
     * vocabulary; no real row reads a padding row).
     */
    Tensor forward(int bs, Tensor drawn, int[] from) {
        Bucket b = bucket(bs);
        for (int i = 0; i < from.length; ) {
            int run = 1;
            while (i + run < from.length && from[i + run] == from[i] + run) {
                run++;
            }
            model.device().copy(drawn.rows(from[i], run), b.tokens.rows(i, run));
            i += run;
        }
        return replay(b);
    }

    /** The bucket of {@code bs} rows for the variant the planned step needs. */
    private Bucket bucket(int bs) {
        return buckets.computeIfAbsent(new BucketVariant(bs, model.graphVariant()), this::newBucket);
    }

    private Tensor replay(Bucket b) {
        if (b.graph == null) {
            b.graph = model.device().capture(b::record);
        }
        b.graph.replay();
        replays++;
        return b.logits;
    }

    /** Decode steps replayed so far. */
    long replays() {
        return replays;
    }

    /**
     * Per recorded bucket, the device bytes its graphs keep allocated: tokens and the forward's temporaries, over its
     * variants (the shared logits not counted).
     */
    Map<Integer, Long> heldBytes() {
        Map<Integer, Long> bytes = new TreeMap<>();
        buckets.forEach((key, b) -> bytes.merge(key.bs(), b.tokens.byteSize()
                + b.held.stream().mapToLong(Tensor::byteSize).sum(), Long::sum));
        return bytes;
    }

    private Bucket newBucket(BucketVariant key) {
        Device device = model.device();
        if (logits == null) {
            logits = device.allocate(DType.F32, maxBucket, model.vocabSize());
        }
        return new Bucket(device.zeros(DType.I32, key.bs()), logits.rows(0, key.bs()));
    }

    /** A bucket's rows and the forward variant its graph records. */
    private record BucketVariant(int bs, int variant) {}

    @Override
    public void close() {
        buckets.values().forEach(Bucket::close);
        buckets.clear();
        if (logits != null) {
            logits.close();
            logits = null;
        }
    }

    /**
     * One bucket's fixed input and output (a view of the shared logits), the forward's temporaries its graph
     * addresses, and the graph.
     */
    private final class Bucket {
        final Tensor tokens;
        final Tensor logits;
        final List<Tensor> held = new ArrayList<>();
        DeviceGraph graph;

        Bucket(Tensor tokens, Tensor logits) {
            this.tokens = tokens;
            this.logits = logits;
        }

        /** The recorded work. Where a replay re-runs it (no graph support) it first frees the last run's temporaries. */
        void record() {
            freeHeld();
            model.forwardAllRows(tokens, logits, held);
        }

        private void freeHeld() {
            held.forEach(Tensor::close);
            held.clear();
        }

        void close() {
            if (graph != null) {
                graph.close();
            }
            freeHeld();
            tokens.close(); // its logits are a view of the shared buffer, which DecodeGraphs closes
        }
    }
}
