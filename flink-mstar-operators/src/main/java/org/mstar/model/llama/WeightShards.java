package org.mstar.model.llama;

import java.util.List;

/**
 * Slicing a row-major {@code [rows, cols]} weight (as {@code ComputeOps.matmul} takes them: {@code [out, in]}) into
 * one rank's shard, and gathering the shards back, on host arrays. Column-parallel weights split their output rows
 * block by block (a fused q/k/v weight is three blocks, gate/up two: each rank takes its slice of each); row-parallel
 * weights split their input columns.
 */
final class WeightShards {
    private WeightShards() {}

    /** Rank {@code rank}'s rows of each block: block b's {@code blockRows[b] / degree} rows at its rank's offset. */
    static float[] rowBlocks(float[] w, long cols, long[] blockRows, int rank, int degree) {
        long shardRows = 0;
        for (long rows : blockRows) {
            shardRows += rows / degree;
        }
        float[] out = new float[Math.toIntExact(shardRows * cols)];
        long src = 0;
        int dst = 0;
        for (long rows : blockRows) {
            long each = rows / degree;
            int n = Math.toIntExact(each * cols);
            System.arraycopy(w, Math.toIntExact(src + rank * each * cols), out, dst, n);
            dst += n;
            src += rows * cols;
        }
        return out;
    }

    /** Rows {@code [first, first + count)}. */
    static float[] rows(float[] w, long cols, long first, long count) {
        float[] out = new float[Math.toIntExact(count * cols)];
        System.arraycopy(w, Math.toIntExact(first * cols), out, 0, out.length);
        return out;
    }

    /** Columns {@code [first, first + count)} of every row. */
    static float[] columns(float[] w, long rows, long cols, long first, long count) {
        float[] out = new float[Math.toIntExact(rows * count)];
        for (long r = 0; r < rows; r++) {
            System.arraycopy(w, Math.toIntExact(r * cols + first), out, Math.toIntExact(r * count), (int) count);
        }
        return out;
    }

    /** The weight {@link #rowBlocks} sliced, from every rank's shard in rank order. */
    static float[] gatherRowBlocks(List<float[]> shards, long cols, long[] blockRows) {
        int degree = shards.size();
        long total = 0;
        for (long rows : blockRows) {
            total += rows;
        }
        float[] out = new float[Math.toIntExact(total * cols)];
        long dst = 0;
        long src = 0;
        for (long rows : blockRows) {
            int n = Math.toIntExact(rows / degree * cols);
            for (float[] shard : shards) {
                System.arraycopy(shard, Math.toIntExact(src), out, Math.toIntExact(dst), n);
                dst += n;
            }
            src += n;
        }
        return out;
    }

    /** The weight of consecutive row ranges, one per shard in rank order. */
    static float[] gatherRows(List<float[]> shards) {
        float[] out = new float[shards.stream().mapToInt(s -> s.length).sum()];
        int dst = 0;
        for (float[] shard : shards) {
            System.arraycopy(shard, 0, out, dst, shard.length);
            dst += shard.length;
        }
        return out;
    }

    /** The weight {@link #columns} sliced into consecutive column ranges, one per shard in rank order. */
    static float[] gatherColumns(List<float[]> shards, long rows) {
        long cols = shards.stream().mapToLong(s -> s.length / rows).sum();
        float[] out = new float[Math.toIntExact(rows * cols)];
        long first = 0;
        for (float[] shard : shards) {
            long count = shard.length / rows;
            for (long r = 0; r < rows; r++) {
                System.arraycopy(shard, Math.toIntExact(r * count), out, Math.toIntExact(r * cols + first),
                        (int) count);
            }
            first += count;
        }
        return out;
    }
}
