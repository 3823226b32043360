package org.mstar.device.cuda;

import java.util.HashMap;
import java.util.Map;
import org.mstar.device.RopeParams;

/**
 * Device copies of RoPE inverse-frequency tables, one per distinct {@link RopeParams}: built on the host
 * in double by {@link RopeParams#invFreq}, rounded once to fp32, uploaded once.
 */
final class RopeTables implements AutoCloseable {
    private final CudaDevice device;
    private final Map<RopeParams, CudaTensor> tables = new HashMap<>();

    RopeTables(CudaDevice device) {
        this.device = device;
    }

    CudaTensor table(RopeParams params) {
        return tables.computeIfAbsent(params, p -> {
            float[] inv = new float[p.rotaryDim() / 2];
            for (int i = 0; i < inv.length; i++) {
                inv[i] = (float) p.invFreq(i);
            }
            return device.uploadConstant(inv);
        });
    }

    @Override
    public void close() {
        tables.values().forEach(CudaTensor::close);
        tables.clear();
    }
}
