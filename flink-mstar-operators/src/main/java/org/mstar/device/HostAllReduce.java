package org.mstar.device;

/**
 * The CPU all-reduce: reads every rank's tensor as fp32, adds them in rank order and writes the sum back into each
 * (rounded to its dtype). It goes through the host, so it would serve any device; the CPU devices of a group use it.
 */
public final class HostAllReduce extends BarrierAllReduce {

    public HostAllReduce(int ranks) {
        super(ranks);
    }

    @Override
    protected void reduce(Tensor[] parts) {
        requireAlike(parts);
        float[] sum = parts[0].device().toFloats(parts[0]);
        for (int r = 1; r < parts.length; r++) {
            float[] p = parts[r].device().toFloats(parts[r]);
            for (int i = 0; i < sum.length; i++) {
                sum[i] += p[i];
            }
        }
        for (Tensor t : parts) {
            try (Tensor s = t.device().fromFloats(sum, t.dtype(), t.shape())) {
                t.device().copy(s, t);
            }
        }
    }
}
