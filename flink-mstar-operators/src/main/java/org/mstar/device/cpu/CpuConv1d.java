package org.mstar.device.cpu;

import org.mstar.device.ComputeOps;
import org.mstar.device.ProjectionOps;
import org.mstar.device.DType;

/**
 * Frames-major 1-D convolution as one matmul: each output frame's receptive field is unrolled into a row
 * {@code cols[t, c·kernel + k] = x[t·stride + k − padding, c]} (zero in the padding), which matches the
 * flattened weight {@code [outChannels, inChannels·kernel]} column for column, so
 * {@code out = cols · weightᵀ + bias} through {@link CpuMatmul}, with its fp32 sum and single rounding.
 */
final class CpuConv1d {
    private CpuConv1d() {}

    static void run(ParallelLoop loop, CpuTensor x, CpuTensor weight, CpuTensor bias, int stride, int padding,
            CpuTensor out) {
        if (x.rank() != 2 || weight.rank() != 3 || weight.dim(1) != x.dim(1)) {
            throw new IllegalArgumentException("conv1d takes x [frames, inChannels] and weight [outChannels, "
                    + "inChannels, kernel], got " + x + " and " + weight);
        }
        int frames = (int) x.dim(0);
        int channels = (int) x.dim(1);
        int kernel = (int) weight.dim(2);
        int outChannels = (int) weight.dim(0);
        int outFrames = ProjectionOps.conv1dOutFrames(frames, kernel, stride, padding);
        if (out.rank() != 2 || out.dim(0) != outFrames || out.dim(1) != outChannels) {
            throw new IllegalArgumentException("conv1d output " + out + " should be [" + outFrames + ", "
                    + outChannels + "]");
        }
        int width = channels * kernel;
        CpuTensor cols = (CpuTensor) x.device().allocate(DType.F32, outFrames, width);
        float[] c = cols.f32();
        loop.forChunks(outFrames, width, (from, to) -> {
            float[] row = new float[channels];
            for (int t = from; t < to; t++) {
                for (int k = 0; k < kernel; k++) {
                    int src = t * stride + k - padding;
                    if (src < 0 || src >= frames) {
                        continue; // the freshly allocated row is already zero there
                    }
                    FloatRows.read(x, src * channels, row, 0, channels);
                    for (int ch = 0; ch < channels; ch++) {
                        c[t * width + ch * kernel + k] = row[ch];
                    }
                }
            }
        });
        CpuMatmul.run(loop, cols, (CpuTensor) weight.reshape(outChannels, width), bias, out);
    }
}
