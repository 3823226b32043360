package org.mstar.device.cuda;

import jcuda.NativePointerObject;

/**
 * The JNI entry points of kernels/src/main/c/graph_shim.c: the driver's graph-edge calls with edge data (CUDA
 * 12.3), which JCuda 12.6 does not wrap. Every call throws IllegalStateException on a driver error.
 */
final class GraphNative {
    private static final String DRIVER = "libcuda.so.1";
    private static boolean opened;

    private GraphNative() {}

    /** Loads the shim and binds the driver's calls once per JVM. */
    static synchronized void load() {
        if (!opened) {
            NativeShim.load();
            try {
                open(DRIVER);
            } catch (UnsatisfiedLinkError e) {
                throw new IllegalStateException("programmatic launch needs the graph calls of a CUDA 12.3+ driver: "
                        + e.getMessage() + ". Switch it off with KernelOptions.withProgrammaticLaunch(false) on the device.", e);
            }
            opened = true;
        }
    }

    /** dlopens {@code library} and binds the calls; throws UnsatisfiedLinkError naming what is missing. */
    private static native boolean open(String library);

    /**
     * Makes every plain edge of {@code graph} from a kernel node to a kernel of {@code module} programmatic;
     * returns how many edges it changed. Must run before the graph is instantiated.
     */
    static native int programmaticEdges(NativePointerObject graph, NativePointerObject module);
}
