package org.mstar.model.moe;

import java.util.List;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.MoeConfig;

/**
 * A sparse layer's MLP over one step's rows: router logits ({@code matmul} with the router weight, fp32), the
 * router's choice ({@code moeRoute}), the routed experts with their weighted combine ({@code moeExperts}), and the
 * shared experts' dense gated MLP added when the layer has them. Its buffers are allocated once per forward pass
 * and handed to the pass's temporaries, so a recorded graph keeps them.
 */
public final class MoeMlp {
    private final ComputeOps ops;
    private final Device device;
    private final MoeConfig moe;
    private final int rows;
    private final DType act;
    private final List<Tensor> temporaries;
    private final Tensor logits;
    private final Tensor ids;
    private final Tensor weights;
    private final int firstExpert;
    /** Non-null when this device holds only some of the experts: the choices renumbered to them. */
    private final Tensor localIds;
    private Tensor sharedGateUp;
    private Tensor sharedAct;
    private Tensor sharedOut;

    /**
     * @param act dtype of the activations and of the shared experts' intermediates
     * @param temporaries the pass's list of tensors to free (or keep for a graph); this adds its own
     */
    public MoeMlp(Device device, MoeConfig moe, int rows, DType act, List<Tensor> temporaries) {
        this(device, moe, rows, act, temporaries, 0, moe.numExperts());
    }

    /**
     * Expert parallelism: this device holds routed experts {@code [firstExpert, firstExpert + experts)} of the
     * router's numbering (and its slice of the shared experts), and its output is their share of each row, which the
     * devices' all-reduce completes.
     */
    public MoeMlp(Device device, MoeConfig moe, int rows, DType act, List<Tensor> temporaries, int firstExpert,
                  int experts) {
        this.ops = device.ops();
        this.device = device;
        this.moe = moe;
        this.rows = rows;
        this.act = act;
        this.temporaries = temporaries;
        int k = moe.routing().topK();
        this.logits = temp(DType.F32, rows, moe.numExperts());
        this.ids = temp(DType.I32, rows, k);
        this.weights = temp(DType.F32, rows, k);
        this.firstExpert = firstExpert;
        this.localIds = experts < moe.numExperts() ? temp(DType.I32, rows, k) : null;
    }

    /** {@code out [n, H]} = the layer's MLP of {@code x [n, H]}. */
    public void run(Tensor x, MoeLayerWeights w, Tensor out) {
        ops.matmul(x, w.router(), null, logits);
        ops.moeRoute(logits, moe.routing(), ids, weights);
        if (localIds == null) {
            ops.moeExperts(x, w.gateUp(), w.down(), ids, weights, out);
        } else {
            ops.moeLocalIds(ids, firstExpert, (int) w.gateUp().dim(0), localIds);
            ops.moeExpertsSlice(x, w.gateUp(), w.down(), localIds, weights, moe.numExperts(), out);
        }
        if (w.shared() != null) {
            long width = w.shared().down().dim(1);
            long hidden = w.shared().down().dim(0);
            if (sharedOut == null) {
                sharedGateUp = temp(act, rows, 2 * width);
                sharedAct = temp(act, rows, width);
                sharedOut = temp(act, rows, hidden);
            }
            ops.gateUpActivation(x, w.shared().gateUp(), false, sharedGateUp, sharedAct);
            ops.matmul(sharedAct, w.shared().down(), null, sharedOut);
            ops.add(out, sharedOut, out);
        }
    }

    private Tensor temp(DType dtype, long... shape) {
        Tensor t = device.allocate(dtype, shape);
        temporaries.add(t);
        return t;
    }
}
