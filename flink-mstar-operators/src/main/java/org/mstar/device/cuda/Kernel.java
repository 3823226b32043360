package org.mstar.device.cuda;

import static jcuda.driver.JCudaDriver.cuFuncSetAttribute;
import static jcuda.driver.JCudaDriver.cuLaunchKernel;
import static jcuda.driver.JCudaDriver.cuOccupancyMaxActiveBlocksPerMultiprocessor;
import static org.mstar.device.cuda.CudaCheck.check;

import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;
import jcuda.driver.CUresult;

/** One kernel of the module, launched with a checked call that names it and its launch shape. */
final class Kernel {
    private final String name;
    private final CUfunction function;
    private int dynamicSmemLimit = 48 * 1024;
    // the last occupancy asked for: launchers ask for one shape per kernel
    private int occupancyBlock;
    private int occupancySmem = -1;
    private int occupancyBlocks;

    Kernel(String name, CUfunction function) {
        this.name = name;
        this.function = function;
    }

    /**
     * Enqueues the kernel on {@code stream}. Grids with a zero dimension are skipped (no work) rather than
     * passed to the driver, which rejects them.
     */
    void launch(CudaStream stream, int gridX, int gridY, int gridZ, int block, int dynamicSmem, KernelArgs args,
                String op) {
        if (gridX == 0 || gridY == 0 || gridZ == 0) {
            return;
        }
        allowDynamicSmem(dynamicSmem);
        stream.counters().launch();
        int rc = cuLaunchKernel(function, gridX, gridY, gridZ, block, 1, 1, dynamicSmem, stream.handle(),
                args.pointer(), null);
        if (rc != CUresult.CUDA_SUCCESS) { // the message is built only on failure: launches are per-step hot
            check(rc, op + ": cuLaunchKernel(" + name + ", grid " + gridX + "x" + gridY + "x" + gridZ + ", block "
                    + block + ", smem " + dynamicSmem + ")");
        }
    }

    /** Blocks of {@code block} threads and {@code dynamicSmem} bytes that one SM holds at once (at least 1). */
    int residentBlocksPerSm(int block, int dynamicSmem) {
        if (block != occupancyBlock || dynamicSmem != occupancySmem) {
            allowDynamicSmem(dynamicSmem);
            int[] blocks = new int[1];
            check(cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, function, block, dynamicSmem),
                    "cuOccupancyMaxActiveBlocksPerMultiprocessor(" + name + ", block " + block + ", smem " + dynamicSmem
                            + ")");
            occupancyBlock = block;
            occupancySmem = dynamicSmem;
            occupancyBlocks = Math.max(1, blocks[0]);
        }
        return occupancyBlocks;
    }

    private void allowDynamicSmem(int dynamicSmem) {
        if (dynamicSmem > dynamicSmemLimit) {
            // Above 48 KB a kernel must opt in to its dynamic shared memory size.
            check(cuFuncSetAttribute(function, CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamicSmem), "cuFuncSetAttribute(" + name + ", dynamic smem " + dynamicSmem + ")");
            dynamicSmemLimit = dynamicSmem;
        }
    }
}
