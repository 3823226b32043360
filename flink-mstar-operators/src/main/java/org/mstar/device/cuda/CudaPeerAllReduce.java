package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuMemcpyPeerAsync;
import static org.mstar.device.cuda.CudaCheck.check;

import java.util.List;
import org.mstar.device.BarrierAllReduce;
import org.mstar.device.Device;
import org.mstar.device.Tensor;

/**
 * The GPUs' all-reduce by peer copies through the driver API (what the JNI shim and JCuda reach without NCCL):
 * once every rank's stream has finished its partial, rank 0 copies each other rank's tensor into a workspace buffer
 * ({@code cuMemcpyPeerAsync}) and adds it to its own in rank order ({@code add}, so the sum is the CPU group's order),
 * then copies the sum back to every other rank and waits for it. Reduce-then-broadcast through one GPU: simple and
 * deterministic, not bandwidth-optimal (a ring would move 2(N-1)/N of the bytes per GPU instead of N-1 through rank
 * 0). Not yet run on two GPUs.
 */
public final class CudaPeerAllReduce extends BarrierAllReduce {
    private final List<CudaDevice> devices;

    public CudaPeerAllReduce(List<Device> devices) {
        super(devices.size());
        this.devices = devices.stream().map(d -> {
            if (!(d instanceof CudaDevice c)) {
                throw new IllegalArgumentException("a CUDA all-reduce over " + d.name() + ", not a CUDA device");
            }
            return c;
        }).toList();
    }

    @Override
    protected void reduce(Tensor[] parts) {
        requireAlike(parts);
        // this runs on one rank's thread, which binds each device in turn (each device binds itself again when a
        // thread that last bound another one calls it)
        for (CudaDevice d : devices) {
            d.enter();
            d.synchronize();
        }
        CudaDevice root = devices.get(0);
        root.enter();
        CudaTensor sum = CudaTensor.of(parts[0], "all-reduce rank 0");
        long bytes = sum.byteSize();
        CudaTensor staged = root.scratch("allreduce.part", sum.dtype(), sum.shape());
        for (int r = 1; r < parts.length; r++) {
            CudaTensor p = CudaTensor.of(parts[r], "all-reduce rank " + r);
            check(cuMemcpyPeerAsync(staged.pointer(), root.context().handle(), p.pointer(),
                    devices.get(r).context().handle(), bytes, root.stream().handle()), "cuMemcpyPeerAsync to rank 0");
            root.ops().add(sum, staged, sum);
        }
        for (int r = 1; r < parts.length; r++) {
            CudaTensor p = CudaTensor.of(parts[r], "all-reduce rank " + r);
            check(cuMemcpyPeerAsync(p.pointer(), devices.get(r).context().handle(), sum.pointer(),
                    root.context().handle(), bytes, root.stream().handle()), "cuMemcpyPeerAsync from rank 0");
        }
        root.synchronize();
    }

}
