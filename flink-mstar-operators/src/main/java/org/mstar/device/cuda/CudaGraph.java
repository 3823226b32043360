package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuGraphDestroy;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphInstantiate;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuStreamBeginCapture;
import static jcuda.driver.JCudaDriver.cuStreamEndCapture;
import static org.mstar.device.cuda.CudaCheck.check;

import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUmodule;
import jcuda.driver.CUstreamCaptureMode;
import org.mstar.device.DeviceGraph;

/**
 * Work captured once on a stream and replayed with one launch. Everything the captured work touches is
 * baked in by address: its tensors must stay allocated and keep their shapes while the graph lives, and
 * replays see whatever those tensors hold at replay time. Ops' own scratch comes from a grow-only
 * workspace, so it stays valid too. The captured code must not synchronise or read results to the host.
 *
 * <p>With programmatic launch, the edges into the project's own kernels become programmatic before the graph is
 * instantiated: such a kernel is scheduled while the kernel before it finishes, and waits for it on the device
 * (every kernel of the module starts with that wait), so its launch overlaps the other's tail.
 */
public final class CudaGraph implements DeviceGraph {
    private final CudaStream stream;
    private final CUgraph graph = new CUgraph();
    private final CUgraphExec exec = new CUgraphExec();
    private int programmaticEdges;
    private boolean closed;

    private CudaGraph(CudaStream stream) {
        this.stream = stream;
    }

    /**
     * Runs {@code work} with {@code stream} in capture mode and instantiates the result. Relaxed mode lets
     * the work allocate (the allocator may call cuMemAlloc on a miss) while capturing. With {@code programmaticFor},
     * the edges into that module's kernels are made programmatic (see above); null keeps plain stream order.
     */
    public static CudaGraph capture(CudaStream stream, Runnable work, CUmodule programmaticFor) {
        CudaGraph g = new CudaGraph(stream);
        check(cuStreamBeginCapture(stream.handle(), CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
                "cuStreamBeginCapture");
        RuntimeException failure = null;
        try {
            work.run();
        } catch (RuntimeException e) {
            failure = e;
        }
        // End the capture even when the work failed, or the stream stays unusable.
        int ended = cuStreamEndCapture(stream.handle(), g.graph);
        if (failure != null) {
            throw failure;
        }
        check(ended, "cuStreamEndCapture");
        if (programmaticFor != null) {
            try {
                GraphNative.load();
                g.programmaticEdges = GraphNative.programmaticEdges(g.graph, programmaticFor);
            } catch (RuntimeException e) {
                cuGraphDestroy(g.graph);
                throw e;
            }
        }
        check(cuGraphInstantiate(g.exec, g.graph, 0L), "cuGraphInstantiate");
        return g;
    }

    /** Edges made programmatic at capture (0 without programmatic launch). */
    public int programmaticEdges() {
        return programmaticEdges;
    }

    /** Enqueues one replay on the stream it was captured on. */
    @Override
    public void replay() {
        check(cuGraphLaunch(exec, stream.handle()), "cuGraphLaunch");
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            check(cuGraphExecDestroy(exec), "cuGraphExecDestroy");
            check(cuGraphDestroy(graph), "cuGraphDestroy");
        }
    }
}
