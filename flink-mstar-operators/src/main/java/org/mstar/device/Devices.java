package org.mstar.device;

import java.lang.reflect.InvocationTargetException;
import java.util.Locale;
import org.mstar.device.cpu.CpuDevice;

/**
 * Opens a device by name: {@code cpu}, or {@code cuda:N} (GPU index N; {@code cuda} = {@code cuda:0}).
 * The CUDA device is loaded by name so CPU-only code never touches JCuda.
 */
public final class Devices {
    private static final String CUDA_DEVICE = "org.mstar.device.cuda.CudaDevice";

    private Devices() {}

    public static Device open(String name) {
        return open(name, KernelOptions.defaults());
    }

    /** The device {@code name} computing with {@code options} for its whole life. */
    public static Device open(String name, KernelOptions options) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        if (n.equals("cpu")) {
            return new CpuDevice(options);
        }
        if (n.equals("cuda") || n.startsWith("cuda:")) {
            int index = n.equals("cuda") ? 0 : parseIndex(name, n.substring(5));
            return openCuda(index, options);
        }
        throw new IllegalArgumentException("unknown device '" + name + "': expected cpu or cuda:N");
    }

    private static int parseIndex(String name, String digits) {
        try {
            int i = Integer.parseInt(digits);
            if (i >= 0) {
                return i;
            }
        } catch (NumberFormatException e) {
            // fall through to the error below
        }
        throw new IllegalArgumentException("unknown device '" + name + "': expected cpu or cuda:N with N >= 0");
    }

    private static Device openCuda(int index, KernelOptions options) {
        try {
            return (Device) Class.forName(CUDA_DEVICE).getConstructor(int.class, KernelOptions.class)
                    .newInstance(index, options);
        } catch (ClassNotFoundException e) {
            throw new DeviceUnavailableException("this build has no CUDA device (" + CUDA_DEVICE + " is missing)", e);
        } catch (InvocationTargetException e) {
            // JCuda's message on a machine without a driver runs to dozens of lines; its first says what is missing
            String why = String.valueOf(e.getCause().getMessage()).lines().findFirst().orElse("").strip();
            throw new DeviceUnavailableException("cannot open cuda:" + index + ": " + why, e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot construct " + CUDA_DEVICE, e);
        }
    }
}
