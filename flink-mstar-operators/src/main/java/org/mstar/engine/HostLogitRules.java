package org.mstar.engine;

import java.util.List;
import org.mstar.device.Tensor;
import org.mstar.resources.sampler.SamplerResource;

/**
 * What a step's {@link ModelRequest}s read of its logits on the host before the draw: the tokens each sampled
 * row's next draw may not take (from its logits where the request's rule needs them, as Whisper's timestamp rules
 * do), and the logits of the rows that yield them instead of a token.
 */
final class HostLogitRules {
    private final SamplerResource sampler;
    private final ModelRunner model;

    HostLogitRules(SamplerResource sampler, ModelRunner model) {
        this.sampler = sampler;
        this.model = model;
    }

    /**
     * Sets the next draw's suppressions of {@code p}'s sampled program rows; returns the host logits of its
     * {@link PlannedStep#logitsRows}, which follow the sampled rows in {@code logits}.
     */
    float[][] apply(PlannedStep p, Tensor logits) {
        List<String> rids = p.sampleRids();
        for (int i = 0; i < rids.size(); i++) {
            ModelRequest program = p.rows().get(p.sampleRows()[i]).request().program;
            if (program != null) {
                int[] ids = program.suppressNext(program.readsLogits() ? row(logits, i) : null);
                if (ids.length > 0) {
                    sampler.suppressNext(rids.get(i), ids);
                }
            }
        }
        float[][] host = new float[p.logitsRows().length][];
        for (int j = 0; j < host.length; j++) {
            host[j] = row(logits, rids.size() + j);
        }
        return host;
    }

    private float[] row(Tensor logits, int i) {
        return model.device().toFloats(logits.rows(i, 1));
    }
}
