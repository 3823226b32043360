package org.mstar.resources.recurrent;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.RecurrentLayer;
import org.mstar.resources.RecurrentStateSpec;

/**
 * The device storage of recurrent states: per declared layer, the SSM states {@code [slots, heads, headDim,
 * stateDim]} and the convolution windows {@code [slots, convDim, convKernel - 1]}, a request's state being row
 * {@code slot} of each. A tensor per layer, rather than one pool, because a hybrid model's Mamba2 layers may differ in
 * shape, the two states in dtype, and a layer's kernel then takes its two tensors and each row's slot as they are.
 *
 * <p>The requests' slots come first, then the prefix cache's snapshot slots ({@link RecurrentStateSpec#snapshotSlots}),
 * which {@link #copy} fills from a request's slot and copies back into another's.
 *
 * <p>A slot's state as host bytes is every layer's SSM state then convolution window, in declared layer order.
 */
final class StatePool implements AutoCloseable {
    private final Device device;
    private final List<Tensor> ssm = new ArrayList<>();
    private final List<Tensor> conv = new ArrayList<>();
    private final long stateBytes;
    /** Zeros as long as the largest slot row, the source of every zeroing upload. */
    private final ByteBuffer zeros;

    StatePool(Device device, RecurrentStateSpec spec) {
        this.device = device;
        DType ssmType = DType.valueOf(spec.ssmDType().name());
        DType convType = DType.valueOf(spec.convDType().name());
        int places = spec.slots() + spec.snapshotSlots();
        try {
            for (RecurrentLayer l : spec.layers()) {
                ssm.add(device.zeros(ssmType, places, l.heads(), l.headDim(), l.stateDim()));
                conv.add(device.zeros(convType, places, l.convDim(), l.convKernel() - 1));
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        this.stateBytes = spec.stateBytes();
        long largest = 0;
        for (int i = 0; i < ssm.size(); i++) {
            largest = Math.max(largest, Math.max(rowBytes(ssm.get(i)), rowBytes(conv.get(i))));
        }
        this.zeros = ByteBuffer.allocate(Math.toIntExact(largest)).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static long rowBytes(Tensor t) {
        return t.byteSize() / t.dim(0);
    }

    /** Layer {@code i} (in declared order)'s SSM states, {@code [slots, heads, headDim, stateDim]}. */
    Tensor ssm(int i) {
        return ssm.get(i);
    }

    /** Layer {@code i} (in declared order)'s convolution windows, {@code [slots, convDim, convKernel - 1]}. */
    Tensor conv(int i) {
        return conv.get(i);
    }

    /** Every layer's state in {@code slot} set to zero: the state before any token. */
    void zero(int slot) {
        for (int i = 0; i < ssm.size(); i++) {
            device.copyFromHost(zeros, ssm.get(i).rows(slot, 1));
            device.copyFromHost(zeros, conv.get(i).rows(slot, 1));
        }
    }

    /** Every layer's state in {@code from} copied into {@code to}, on the device. */
    void copy(int from, int to) {
        for (int i = 0; i < ssm.size(); i++) {
            device.copy(ssm.get(i).rows(from, 1), ssm.get(i).rows(to, 1));
            device.copy(conv.get(i).rows(from, 1), conv.get(i).rows(to, 1));
        }
    }

    /** {@code slot}'s state as host bytes. */
    byte[] read(int slot) {
        byte[] bytes = new byte[Math.toIntExact(stateBytes)];
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < ssm.size(); i++) {
            b.position(move(ssm.get(i).rows(slot, 1), b, true));
            b.position(move(conv.get(i).rows(slot, 1), b, true));
        }
        return bytes;
    }

    /** Overwrites {@code slot}'s state with {@code bytes}, as {@link #read} gives them. */
    void write(int slot, byte[] bytes) {
        if (bytes.length != stateBytes) {
            throw new IllegalArgumentException(bytes.length + " bytes for a recurrent state of " + stateBytes);
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < ssm.size(); i++) {
            b.position(move(ssm.get(i).rows(slot, 1), b, false));
            b.position(move(conv.get(i).rows(slot, 1), b, false));
        }
    }

    /** Copies one slot row between the device and {@code b} at its position; returns the position past it. */
    private int move(Tensor row, ByteBuffer b, boolean toHost) {
        int n = Math.toIntExact(row.byteSize());
        ByteBuffer region = b.slice(b.position(), n).order(ByteOrder.LITTLE_ENDIAN);
        if (toHost) {
            device.copyToHost(row, region);
        } else {
            device.copyFromHost(region, row);
        }
        return b.position() + n;
    }

    /** Bytes of one slot's state. */
    long stateBytes() {
        return stateBytes;
    }

    /** Device bytes of every slot's state, the snapshot slots' included. */
    long byteSize() {
        return ssm.stream().mapToLong(Tensor::byteSize).sum() + conv.stream().mapToLong(Tensor::byteSize).sum();
    }

    @Override
    public void close() {
        ssm.forEach(Tensor::close);
        conv.forEach(Tensor::close);
        ssm.clear();
        conv.clear();
    }
}
