package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuModuleGetFunction;
import static jcuda.driver.JCudaDriver.cuModuleLoadData;
import static jcuda.driver.JCudaDriver.cuModuleUnload;
import static org.mstar.device.cuda.CudaCheck.check;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;

/** The kernels fatbin of the mstar-kernels jar, loaded into the current context; kernels looked up by name. */
final class KernelModule implements AutoCloseable {
    static final String RESOURCE = "org/mstar/kernels/mstar_kernels.fatbin";
    static final String NO_KERNELS = "This build of flink-mstar has no CUDA kernels (" + RESOURCE + " is not on the"
            + " class path: the build found no nvcc, or the mstar-kernels jar is missing). Rebuild with nvcc (CUDA 13.0)"
            + " on the PATH to run on a GPU, or serve on the cpu device.";

    private final CUmodule module = new CUmodule();
    private final Map<String, Kernel> kernels = new HashMap<>();
    private boolean closed;

    KernelModule() {
        byte[] image = readResource();
        check(cuModuleLoadData(module, image), "cuModuleLoadData(" + RESOURCE + ", " + image.length + " bytes)");
    }

    /** Throws {@link #NO_KERNELS} when this build carries no fatbin, before any CUDA call. */
    static void requireBuilt() {
        if (KernelModule.class.getClassLoader().getResource(RESOURCE) == null) {
            throw new IllegalStateException(NO_KERNELS);
        }
    }

    private static byte[] readResource() {
        try (InputStream in = KernelModule.class.getClassLoader().getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException(NO_KERNELS);
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + RESOURCE, e);
        }
    }

    /** The loaded module, for telling its kernels from other libraries' in a captured graph. */
    CUmodule handle() {
        return module;
    }

    Kernel kernel(String name) {
        return kernels.computeIfAbsent(name, n -> {
            CUfunction f = new CUfunction();
            check(cuModuleGetFunction(f, module, n), "cuModuleGetFunction(" + n + ")");
            return new Kernel(n, f);
        });
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            check(cuModuleUnload(module), "cuModuleUnload");
        }
    }
}
