package org.mstar.device;

/**
 * A Mamba2 mixer's geometry as its ops ({@link StateSpaceOps}) read it. The input projection's row is
 * {@code [z (inner) | xBC (convDim) | dt (heads)]}, the order of transformers' {@code in_proj} split; xBC is
 * {@code [x (inner) | B (groups·stateDim) | C (groups·stateDim)]}, head {@code h} reading the B and C of group
 * {@code h / (heads / groups)}.
 *
 * @param heads      SSM heads
 * @param headDim    channels of a head; {@code inner = heads · headDim}
 * @param groups     groups of heads sharing B and C
 * @param stateDim   state size per channel ({@code N})
 * @param convKernel width of the causal depthwise convolution over xBC
 * @param chunkSize  tokens of a chunk of the prefill scan (the CPU reference chunks as transformers does)
 * @param dtMin      lower clamp of the step size after softplus ({@code time_step_limit[0]})
 * @param dtMax      upper clamp ({@code time_step_limit[1]}, may be infinite)
 */
public record Mamba2Shape(int heads, int headDim, int groups, int stateDim, int convKernel, int chunkSize, float dtMin,
                          float dtMax) {
    public Mamba2Shape {
        if (heads < 1 || headDim < 1 || groups < 1 || stateDim < 1 || chunkSize < 1) {
            throw new IllegalArgumentException("a Mamba2 shape needs heads, headDim, groups, stateDim and chunkSize"
                    + " >= 1, got " + heads + ", " + headDim + ", " + groups + ", " + stateDim + ", " + chunkSize);
        }
        if (heads % groups != 0) {
            throw new IllegalArgumentException(heads + " heads do not split into " + groups + " groups");
        }
        if (convKernel < 2) {
            throw new IllegalArgumentException("a causal convolution of width " + convKernel + "; it needs >= 2");
        }
        if (!(dtMin >= 0) || !(dtMax >= dtMin)) {
            throw new IllegalArgumentException("time step limits [" + dtMin + ", " + dtMax + "]");
        }
    }

    /** Channels of x, y and the gate z: {@code heads · headDim}. */
    public int inner() {
        return heads * headDim;
    }

    /** Columns of B (and of C): {@code groups · stateDim}. */
    public int groupStates() {
        return groups * stateDim;
    }

    /** Channels of xBC, which the convolution runs over: {@code inner + 2 · groups · stateDim}. */
    public int convDim() {
        return inner() + 2 * groupStates();
    }

    /** Columns of the input projection's row: {@code inner + convDim + heads}. */
    public int projWidth() {
        return inner() + convDim() + heads;
    }

    /** First column of xBC in the projection's row. */
    public int xbcColumn() {
        return inner();
    }

    /** First column of dt in the projection's row. */
    public int dtColumn() {
        return inner() + convDim();
    }

    /** Heads that share one group's B and C. */
    public int headsPerGroup() {
        return heads / groups;
    }
}
