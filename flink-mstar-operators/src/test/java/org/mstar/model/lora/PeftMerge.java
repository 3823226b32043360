package org.mstar.model.lora;

import java.util.Map;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.AdapterWeights;

/**
 * PEFT's merge of an adapter into a model's weights ({@code W += scaling · B · A}): the reference an engine serving
 * the adapter must equal.
 */
public final class PeftMerge {
    private PeftMerge() {}

    /**
     * PEFT's merge of {@code adapter} into {@code weights}: every targeted module's weight {@code W [out, in]} becomes
     * {@code W + scale · B · A}, the product summed in double and the sum rounded once to the weights' dtype.
     */
    public static void merge(LlamaWeights weights, AdapterWeights adapter) {
        Device device = weights.device();
        Map<String, Tensor> hf = weights.hfTensors();
        for (String module : adapter.a().keySet()) {
            LoraModule m = LoraModule.of(module, weights.config()).orElseThrow();
            int r = adapter.rank();
            for (int l = 0; l < weights.config().numLayers(); l++) {
                Tensor w = hf.get("model.layers." + l + "." + m.path() + ".weight");
                int out = (int) w.dim(0);
                int in = (int) w.dim(1);
                float[] a = adapter.a().get(module).get(l);
                float[] b = adapter.b().get(module).get(l);
                float[] merged = device.toFloats(w);
                for (int j = 0; j < out; j++) {
                    for (int c = 0; c < in; c++) {
                        double delta = 0;
                        for (int k = 0; k < r; k++) {
                            delta += (double) b[j * r + k] * a[k * in + c];
                        }
                        merged[j * in + c] = (float) (merged[j * in + c] + adapter.scale() * delta);
                    }
                }
                try (Tensor updated = device.fromFloats(merged, w.dtype(), w.shape())) {
                    device.copy(updated, w);
                }
            }
        }
    }
}
