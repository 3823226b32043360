package org.mstar.device.cuda;

import java.util.ArrayList;
import java.util.List;
import jcuda.NativePointerObject;
import jcuda.Pointer;

/** Kernel parameters in declaration order, each held as a pointer to its value (cuLaunchKernel's form). */
final class KernelArgs {
    private static final Pointer NULL_DEVICE_POINTER = Pointer.to(new long[] {0L});

    private final List<NativePointerObject> values = new ArrayList<>();

    /** A tensor's device address, or a null pointer for an absent optional tensor. */
    KernelArgs tensor(CudaTensor t) {
        values.add(t == null ? NULL_DEVICE_POINTER : Pointer.to(t.pointer()));
        return this;
    }

    KernelArgs i32(int v) {
        values.add(Pointer.to(new int[] {v}));
        return this;
    }

    KernelArgs i64(long v) {
        values.add(Pointer.to(new long[] {v}));
        return this;
    }

    KernelArgs f32(float v) {
        values.add(Pointer.to(new float[] {v}));
        return this;
    }

    KernelArgs flag(boolean v) {
        return i32(v ? 1 : 0);
    }

    Pointer pointer() {
        return Pointer.to(values.toArray(new NativePointerObject[0]));
    }
}
