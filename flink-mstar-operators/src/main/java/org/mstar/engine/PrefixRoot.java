package org.mstar.engine;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.Resource;
import org.mstar.resources.kv.PrefixKeys;

/**
 * The prefix cache's process root: every resource's fingerprint plus what the weights are, so a page
 * cached under one model, layout or position scheme can never be matched under another.
 */
final class PrefixRoot {
    private PrefixRoot() {}

    static byte[] of(Collection<Resource> resources, LlamaModel model) {
        List<Object> fields = new ArrayList<>();
        fields.add(model.config().toJson().toString());
        fields.add(model.weightsId());
        for (Resource r : resources) {
            byte[] f = r.fingerprint();
            if (f != null) {
                fields.add(f);
            }
        }
        return PrefixKeys.fingerprint(fields.toArray());
    }
}
