package org.mstar.engine;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.Resource;
import org.mstar.resources.kv.PrefixKeys;

/**
 * The prefix cache's process root: every resource's fingerprint plus what the weights are, so a page
 * cached under one model, layout or position scheme can never be matched under another.
 */
final class PrefixRoot {
    private PrefixRoot() {}

    /** @param identity what the weights are ({@link ModelRunner#identity()}), first in the root */
    static byte[] of(Collection<Resource> resources, List<Object> identity) {
        List<Object> fields = new ArrayList<>(identity);
        for (Resource r : resources) {
            r.capability(PrefixCaching.class).map(PrefixCaching::fingerprint).ifPresent(fields::add);
        }
        return PrefixKeys.fingerprint(fields.toArray());
    }
}
