package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.mstar.resources.CachedPrefix;

/**
 * The prefix cache as streams meet it before they run: a probe leases matching cached pages to the
 * walk's streams, the agreed prefix trims the leases, admit (or a walk the cache served whole) turns
 * them into the streams' leading pages. Also the TP variant (rank 0 leases, followers adopt the same
 * pages) and keying of pages that generated tokens fill. The manager's lock guards every call.
 */
final class PrefixLeases {
    private final KVState st;

    PrefixLeases(KVState st) {
        this.st = st;
    }

    /**
     * Lease the cached pages matching the walk's streams' keys, stopping one key short so at least one
     * token runs, and answer their length (the minimum over the walk's labels). Null (no opinion) when
     * the walk or a label is not keyed or a stream is not empty. A repeated probe answers the same
     * length and takes no extra reference.
     */
    CachedPrefix resolve(String rid, String nodeName, String graphWalk) {
        List<CacheStream> streams = probeStreams(rid, nodeName, graphWalk);
        if (streams == null) {
            return null;
        }
        int agreed = Integer.MAX_VALUE;
        for (CacheStream s : streams) {
            if (s.lease == null) {
                List<Integer> matched = st.prefix.match(s.chain, s.chain.totalKeys() - 1);
                matched.forEach(st.arena::retain);
                s.lease = new ArrayList<>(matched);
            }
            agreed = Math.min(agreed, s.lease.size() * st.pageSize);
        }
        return new CachedPrefix(agreed);
    }

    /** The walk's streams when every one can be served from the cache; else null. */
    private List<CacheStream> probeStreams(String rid, String node, String walk) {
        RequestState r = st.request(rid);
        if (r == null || st.prefix == null || !st.prefix.keyedWalk(walk)) {
            return null;
        }
        List<CacheStream> streams = new ArrayList<>();
        for (String label : r.cfg.labels(node, walk)) {
            CacheStream s = st.openStream(rid, label);
            boolean fresh = s.chain != null && s.storedLen == 0 && !s.offloaded && !s.readPending();
            if (!fresh && s.lease == null) {
                return null;
            }
            streams.add(s);
        }
        return streams.isEmpty() ? null : streams;
    }

    /** Trim each lease of the walk to the agreed prefix in whole pages (all of it when none was agreed). */
    void trim(String rid, String nodeName, String graphWalk, CachedPrefix prefix) {
        int keep = prefix == null ? 0 : prefix.tokens() / st.pageSize;
        for (CacheStream s : walkStreams(rid, nodeName, graphWalk)) {
            if (s.lease != null && s.lease.size() > keep) {
                List<Integer> gone = s.lease.subList(keep, s.lease.size());
                st.arena.releaseAll(gone);
                gone.clear();
            }
            if (s.lease != null && s.lease.isEmpty()) {
                s.lease = null;
            }
        }
    }

    /** The cache served the whole walk, which will never admit: its leases become the streams' content. */
    void complete(String rid, String nodeName, String graphWalk) {
        for (CacheStream s : walkStreams(rid, nodeName, graphWalk)) {
            if (s.lease != null && s.storedLen == 0) {
                st.adoptLease(s);
            }
        }
    }

    /** On rank 0: probe, and hand out the leased pages of the walk's one keyed label for followers to adopt. */
    List<Integer> leaseForFollowers(String rid, String nodeName, String graphWalk) {
        List<CacheStream> streams = probeStreams(rid, nodeName, graphWalk);
        if (streams == null || streams.size() != 1) {
            return null;
        }
        resolve(rid, nodeName, graphWalk);
        return List.copyOf(streams.get(0).lease);
    }

    /**
     * On a follower: lease the pages rank 0 leased. False while this rank's index does not yet hold
     * them all; once {@code caughtUp}, missing pages mean the ranks diverged, which throws.
     */
    boolean adopt(String rid, String nodeName, String graphWalk, List<Integer> pages, boolean caughtUp) {
        List<CacheStream> streams = probeStreams(rid, nodeName, graphWalk);
        if (streams == null || streams.size() != 1) {
            throw new IllegalStateException("rank 0 leased a prefix for '" + rid + "' that this rank cannot key");
        }
        CacheStream s = streams.get(0);
        if (s.lease != null) {
            return true;
        }
        for (int p : pages) {
            if (!st.prefix.index().holdsPage(p)) {
                if (caughtUp) {
                    throw new IllegalStateException("rank 0 leased page " + p + " for '" + rid
                            + "', which this caught-up rank's index does not hold");
                }
                return false;
            }
        }
        pages.forEach(st.arena::retain);
        s.lease = new ArrayList<>(pages);
        return true;
    }

    void release(String rid, String nodeName, String graphWalk) {
        for (CacheStream s : walkStreams(rid, nodeName, graphWalk)) {
            st.dropLease(s);
        }
    }

    /** Key pages that this step's sampled tokens fill, for labels the request decodes into a keyed chain. */
    void extendChains(String rid, String nodeName, String graphWalk, Map<String, int[]> outputs) {
        RequestState r = st.request(rid);
        if (r == null || st.prefix == null || !st.prefix.keyedWalk(graphWalk) || r.cfg.prefixDecode() == null) {
            return;
        }
        for (String label : r.cfg.labels(nodeName, graphWalk)) {
            String output = r.cfg.prefixDecode().get(label);
            CacheStream s = r.streams.get(label);
            int[] ids = output == null ? null : outputs.get(output);
            if (ids != null && s != null && s.chain != null) {
                s.chain.extend(ids);
            }
        }
    }

    private List<CacheStream> walkStreams(String rid, String node, String walk) {
        RequestState r = st.request(rid);
        List<CacheStream> out = new ArrayList<>();
        if (r != null) {
            for (String label : r.cfg.labels(node, walk)) {
                CacheStream s = r.streams.get(label);
                if (s != null) {
                    out.add(s);
                }
            }
        }
        return out;
    }
}
