package org.mstar.resources.runner;

import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.CGSlotSpec;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.GraphBuffers;
import org.mstar.resources.Planning;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.Preplanning;
import org.mstar.resources.Publication;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.StepContext;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A resource that writes every call into a journal shared by all resources of a test ("key.method", or
 * "key.method:arg"), and answers as the test arms it.
 */
final class RecordingResource implements Resource, Admission, Planning<Object>, Preplanning, GraphBuffers,
        Publication<PublishedInfo>, PrefixCaching {
    private final String key;
    private final Set<String> deps;
    private final List<String> journal;

    final Set<String> rids = new HashSet<>();
    final Map<String, ResourceReqConfig> configs = new HashMap<>();
    /** A copy of ctx.planResults() as this resource saw it when planning, and the pre-plan flag. */
    final List<Map<String, Object>> planResultsSeen = new ArrayList<>();
    final List<Boolean> preplanSeen = new ArrayList<>();
    final List<PublishedInfo> retrieved = new ArrayList<>();

    AdmitOutcome admitAnswer = AdmitOutcome.OK;
    RuntimeException admitFailure;
    RuntimeException ingestFailure;
    RuntimeException removeFailure;
    /** Whether it offers {@link Preplanning} and {@link Publication}: armed per test, like the answers. */
    boolean preplans;
    boolean publication;
    AdmitOutcome retrieveAnswer = AdmitOutcome.OK;
    PublishedInfo publishes;
    CachedPrefix cachedPrefix;
    /** The prefixes it can take on: a cut of the asked length to this many tokens' multiples; 0 takes any. */
    int prefixMultiple;
    boolean chains;
    List<Integer> lease;
    boolean adopts = true;
    long[] trail;

    RecordingResource(String key, List<String> journal, String... deps) {
        this.key = key;
        this.journal = journal;
        this.deps = Set.of(deps);
    }

    private void log(String method) {
        journal.add(key + "." + method);
    }

    @Override public Set<String> dependsOn() { return deps; }

    @Override
    public <C> Optional<C> capability(Class<C> type) {
        if (type == Preplanning.class && !preplans || type == Publication.class && !publication) {
            return Optional.empty();
        }
        return Resource.super.capability(type);
    }

    @Override
    public void ingestRequest(String rid, ResourceReqConfig cfg) {
        log("ingestRequest:" + rid);
        if (ingestFailure != null) {
            throw ingestFailure;
        }
        if (rids.add(rid)) {
            configs.put(rid, cfg);
        }
    }

    @Override
    public void ingestCaptureRow(String rid) {
        log("ingestCaptureRow:" + rid);
        rids.add(rid);
    }

    @Override
    public void removeRequest(String rid) {
        log("removeRequest:" + rid);
        rids.remove(rid);
        configs.remove(rid);
        if (removeFailure != null) {
            throw removeFailure;
        }
    }

    @Override
    public AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        log("admit");
        if (admitFailure != null) {
            throw admitFailure;
        }
        return admitAnswer;
    }

    @Override public void rollbackAdmit(ResourceStep step, StepContext ctx) { log("rollbackAdmit"); }

    @Override
    public Object plan(ResourceStep step, StepContext ctx) {
        log("plan");
        planResultsSeen.add(new HashMap<>(ctx.planResults()));
        preplanSeen.add(ctx.isPreplan());
        return key + "-plan";
    }

    @Override public void commit(ResourceStep step, StepContext ctx) { log("commit"); }
    @Override public void clearPreplan() { log("clearPreplan"); }

    @Override
    public void buildAcceleratorGraphBuffers(List<CGSlotSpec> slots, int maxBs, int maxSeqLen) {
        log("buildAcceleratorGraphBuffers");
    }

    @Override
    public AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk, PublishedInfo published) {
        log("admitRetrieve");
        retrieved.add(published);
        return retrieveAnswer;
    }

    @Override public Class<PublishedInfo> publishedType() { return PublishedInfo.class; }

    @Override public PublishedInfo publish(String rid) { return publishes; }

    @Override
    public PublishedInfo publishForStep(String rid, String nodeName, String graphWalk) {
        log("publishForStep:" + rid + "@" + graphWalk);
        return publishes;
    }

    @Override
    public PublishedInfo publishAfterStop(String rid, String nodeName, String graphWalk) {
        log("publishAfterStop:" + rid);
        return publishes;
    }

    @Override
    public CachedPrefix resolveCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs) {
        log("resolveCachedPrefix");
        return cachedPrefix;
    }

    @Override
    public int fitCachedPrefix(String rid, String nodeName, String graphWalk, int tokens) {
        return prefixMultiple == 0 ? tokens : tokens / prefixMultiple * prefixMultiple;
    }

    @Override
    public void applyCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs,
                                  CachedPrefix prefix) {
        log("applyCachedPrefix:" + (prefix == null ? "none" : prefix.tokens()));
    }

    @Override
    public void completeCachedWalk(String rid, String nodeName, String graphWalk) {
        log("completeCachedWalk");
    }

    @Override public boolean keysPrefixChains() { return chains; }

    @Override
    public void extendPrefixChain(String rid, String nodeName, String graphWalk, Map<String, int[]> outputs) {
        log("extendPrefixChain:" + rid + "@" + graphWalk);
    }

    @Override
    public List<Integer> leaseCachedPrefix(String rid, String nodeName, String graphWalk) {
        log("leaseCachedPrefix");
        return lease;
    }

    @Override
    public boolean adoptCachedPrefix(String rid, String nodeName, String graphWalk, List<Integer> pages,
                                     boolean caughtUp) {
        log("adoptCachedPrefix:" + pages);
        return adopts;
    }

    @Override
    public void releaseCachedPrefix(String rid, String nodeName, String graphWalk) {
        log("releaseCachedPrefix");
    }

    @Override
    public long[] pageTrail() {
        log("pageTrail");
        return trail;
    }
}
