package org.mstar.resources;

/**
 * The fixed-size state one recurrent (Mamba2) layer keeps per request: the SSM state {@code [heads, headDim,
 * stateDim]} and the causal convolution's window of the last {@code convKernel - 1} inputs, {@code [convDim,
 * convKernel - 1]}.
 *
 * @param layer the model layer it belongs to (a hybrid model's attention layers have none)
 */
public record RecurrentLayer(int layer, int heads, int headDim, int stateDim, int convDim, int convKernel) {
    public RecurrentLayer {
        if (layer < 0) {
            throw new IllegalArgumentException("a recurrent layer index must be >= 0, got " + layer);
        }
        if (heads < 1 || headDim < 1 || stateDim < 1 || convDim < 1) {
            throw new IllegalArgumentException("layer " + layer + ": heads, headDim, stateDim and convDim must be"
                    + " >= 1, got " + heads + ", " + headDim + ", " + stateDim + ", " + convDim);
        }
        if (convKernel < 2) {
            throw new IllegalArgumentException("layer " + layer + ": a causal convolution keeps convKernel - 1"
                    + " inputs, so convKernel must be >= 2, got " + convKernel);
        }
    }

    /** Elements of the SSM state. */
    public long ssmElements() {
        return (long) heads * headDim * stateDim;
    }

    /** Elements of the convolution window. */
    public long convElements() {
        return (long) convDim * (convKernel - 1);
    }
}
