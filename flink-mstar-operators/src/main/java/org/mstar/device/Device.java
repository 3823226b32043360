package org.mstar.device;

import java.util.Optional;

import java.nio.ByteBuffer;

/**
 * One compute device (a CUDA GPU or the CPU reference): allocation, host transfer, and its
 * {@link ComputeOps}. Not thread-safe: one step loop drives a device.
 */
public interface Device extends AutoCloseable {
    /** For logs and errors, e.g. "cpu" or "cuda:0 (NVIDIA H200)". */
    String name();

    boolean isCuda();

    /** A new tensor with unspecified contents (tests poison it). */
    Tensor allocate(DType dtype, long... shape);

    /** A new zero-filled tensor. */
    Tensor zeros(DType dtype, long... shape);

    /** Upload floats, rounding to {@code dtype} (round-to-nearest-even for bf16/f16). */
    Tensor fromFloats(float[] data, DType dtype, long... shape);

    /** Upload ints as an I32 tensor. */
    Tensor fromInts(int[] data, long... shape);

    /** Download any float tensor widened to fp32 (synchronises). */
    float[] toFloats(Tensor t);

    /** Download an I32 tensor (synchronises). */
    int[] toInts(Tensor t);

    /**
     * Starts copying the I32 tensor {@code t} to the host behind the work enqueued so far and returns at once:
     * more work may be enqueued before {@link PendingInts#get}, which then waits for the copy only. A device that
     * runs every op when it is called reads at once.
     */
    default PendingInts readIntsLater(Tensor t) {
        int[] values = toInts(t);
        return () -> values;
    }

    /** Copy raw bytes (exact for every dtype) from host memory into {@code dst}. */
    void copyFromHost(ByteBuffer src, Tensor dst);

    /** Copy raw bytes of {@code src} into host memory (synchronises). */
    void copyToHost(Tensor src, ByteBuffer dst);

    /** Device-to-device copy of whole tensors of equal byte size. */
    void copy(Tensor src, Tensor dst);

    ComputeOps ops();

    DeviceStream stream();

    /**
     * Records {@code work} (device ops only: no host reads, no uploads) for later replays. Without graph
     * support, as on the CPU, nothing runs now and each replay runs {@code work} again, which computes what
     * a replay of recorded work would.
     */
    default DeviceGraph capture(Runnable work) {
        return new DeviceGraph() {
            @Override
            public void replay() {
                work.run();
            }

            @Override
            public void close() {
            }
        };
    }

    /**
     * Makes this device usable from the calling thread. A CUDA context is current per thread, and the threads that
     * drive an engine change (Flink calls an operator from its mailbox thread, a new task thread after a restart,
     * and may close it from another), so whoever takes a device's turn calls this first. Nothing to do on the CPU.
     */
    default void bindToCurrentThread() {
    }

    /** The kernel variants this device computes with, fixed when it was built. */
    KernelOptions options();

    /**
     * A view of this device computing with {@code options}: the same memory and stream (on a GPU the same context),
     * so tensors made through either serve the ops of either, and only the variants its ops choose differ. Engines
     * sharing a device each take a view with their own options instead of changing the device under the others.
     * Always a new view, never this device. A view owns nothing: closing it frees nothing, and it is not used after
     * the device it came from is closed.
     */
    Device withOptions(KernelOptions options);

    /**
     * Whether every op gives a row the same bits whatever other rows share its call, so that a request's tokens do
     * not depend on what it was batched or chunked with: {@link KernelOptions#batchInvariant()} on a GPU; the CPU
     * reference always does.
     */
    default boolean batchInvariant() {
        return true;
    }

    /** The device's memory, where it has its own (a GPU); empty on the CPU, which shares the host's. */
    default Optional<DeviceMemory> memory() {
        return Optional.empty();
    }

    /** Returns memory freed by this process but kept for reuse to the driver, so {@link #memory()} counts it free. */
    default void releaseCachedMemory() {
    }

    /**
     * Whether this device's ops take tensors of {@code other} as their own: {@code other} is this device or a view of
     * it ({@link #withOptions}).
     */
    boolean sameDevice(Device other);

    /**
     * Copies {@code ranges} of {@code src}, a tensor of {@code from} (another device of this process, of this kind),
     * into {@code dst} of this device, on this device's side (a GPU: peer copies on its stream); done when this
     * returns. Nothing queued on {@code from} may still write those bytes: this does not wait for {@code from}, whose
     * stream another thread may be driving.
     *
     * @throws IllegalArgumentException for a device of another kind, or ranges outside the tensors
     */
    void copyFrom(Device from, Tensor src, Tensor dst, ByteRanges ranges);

    /** Wait for all enqueued work. */
    default void synchronize() {
        stream().synchronize();
    }

    @Override
    void close();
}
