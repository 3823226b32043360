package org.mstar.resources.runner;

import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.CGSlotSpec;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.GraphBuffers;
import org.mstar.resources.Planning;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.Preplanning;
import org.mstar.resources.Publication;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceDeclarations;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * Drives a worker's resources through each step (admit → plan → forward → commit) and through the
 * request-, node- and prefix-cache sweeps around it.
 *
 * <p>Every sweep runs in the deterministic topological order of {@link Resource#dependsOn()} (Kahn
 * layering, alphabetical within a level); unwinding runs in reverse. A sweep asks each resource for the
 * capability it drives ({@link Resource#capability}: {@link Admission}, {@link Planning}, {@link Publication},
 * {@link PrefixCaching}, ...) and passes over those without it, as if they answered with the documented
 * no-op. A step sweep touches only the resources the step declares. A node-scoped sweep touches only the
 * node's own resources, because a resource asked about a node it does not serve would answer with defaults
 * (KV's "main" label) and gate, or allocate for, another node's cache.
 *
 * <p>Not thread-safe: the engine makes every call from its step loop, or hands over to the plan thread
 * with a happens-before edge ({@link #preAdmit}/{@link #prePlan} run only between one step's commit and the
 * next step's admit).
 */
public final class StepRunner {

    // ---------------------------------------------------------------- configuration

    private final Map<String, Resource> resources;
    private final List<String> order;
    /** node → its keys in topological order; null when the runner was built without node scoping. */
    private final Map<String, List<String>> nodeOrder;
    private final Set<String> preplanning;

    // ---------------------------------------------------------------- runtime state

    /** A step's resource orders, cached by the set of keys it declares. */
    private final Map<Set<String>, StepOrder> stepOrders = new HashMap<>();
    /** rid → keys of the resources an ingest through this runner opened it on. */
    private final Map<String, Set<String>> ingested = new HashMap<>();
    /** The pre-planned step awaiting promotion, or null. */
    private StagedStep staged;
    /** The step object {@link #staged} was taken from: the same object needs no comparison. */
    private SubmoduleStep stagedFrom;

    /** A step's declared keys in topological order, and the pre-planning ones among them. */
    private record StepOrder(List<String> all, List<String> preplanning) {}

    /** One publisher's answer for one request, under that request's walk; null means nothing to report. */
    @FunctionalInterface
    private interface PerRequest<V> {
        V answer(String key, Publication<?> publisher, String rid, String walk);
    }

    /**
     * @param resources     the worker's resources by key
     * @param nodeResources node → keys of the resources it owns; list every node, including nodes that own
     *                      nothing. Null, or a node missing from it, sweeps every resource.
     * @throws IllegalArgumentException for an undeclared or cyclic dependency, a node naming an unknown key,
     *                                  or a pre-planning resource with a dependency that does not pre-plan
     */
    public StepRunner(Map<String, ? extends Resource> resources,
                      Map<String, ? extends Collection<String>> nodeResources) {
        this.order = ResourceDeclarations.topoSort(resources, Resource::dependsOn);
        Map<String, Resource> ordered = new LinkedHashMap<>();
        order.forEach(key -> ordered.put(key, resources.get(key)));
        this.resources = Collections.unmodifiableMap(ordered);
        this.nodeOrder = nodeResources == null ? null : nodeOrders(nodeResources);
        this.preplanning = preplanningKeys();
    }

    /** Every resource's key, in topological order. */
    public List<String> order() {
        return order;
    }

    /** The resources by key, in topological order. */
    public Map<String, Resource> resources() {
        return resources;
    }

    // ---------------------------------------------------------------- step cycle

    /**
     * Reserve capacity for {@code step}. A staged pre-plan for a different step is dropped first. On a
     * refusal, every resource reached, including the one that refused, rolls back in reverse order.
     *
     * @return OK; NOT_READY when every resource admitted but one is not usable yet; or the refusal, naming
     *         the first refusing resource's key
     */
    public FullAdmitOutcome admit(SubmoduleStep step) {
        StepOrder o = orderOf(step);
        dropStalePreplan(step, o);
        return admitOver(o.all(), step);
    }

    /**
     * Give back what an admitted step reserved, for a step that will not run: the unwind of a refused
     * admit, over every resource the step declares, in reverse order.
     */
    public void rollbackAdmit(SubmoduleStep step) {
        rollback(orderOf(step).all(), step, null);
    }

    /**
     * Plan {@code step} in dependency order; each result is in {@code ctx.planResults()} before the next
     * resource plans. Unless {@code ctx.isPreplan()}, earlier results are cleared and a matching staged
     * pre-plan counts as promoted.
     *
     * @return key → plan result (possibly null) of this step's resources, in topological order
     */
    public Map<String, Object> plan(SubmoduleStep step) {
        StepOrder o = orderOf(step);
        dropStalePreplan(step, o);
        StepContext ctx = step.ctx();
        if (!ctx.isPreplan()) {
            staged = null;
            stagedFrom = null;
            ctx.planResults().clear();
        }
        return planOver(o.all(), step);
    }

    /** Record what {@code step} consumed, in dependency order, once its forward is enqueued. */
    public void commit(SubmoduleStep step) {
        commit(step, key -> true);
    }

    /**
     * {@link #commit} over the step's resources whose key {@code keys} accepts, in dependency order. Lets a
     * caller commit what the enqueued forward consumed at once (so the next step can be pre-planned on top)
     * and a resource that records the forward's outputs, such as the sampler, once they are read.
     */
    public void commit(SubmoduleStep step, Predicate<String> keys) {
        StepContext ctx = step.ctx();
        for (String key : orderOf(step).all()) {
            if (keys.test(key)) {
                resources.get(key).commit(step.get(key), ctx);
            }
        }
    }

    // ---------------------------------------------------------------- pre-plan

    /**
     * {@link #admit} over the pre-planning resources of {@code step} only, a step ahead; the later full
     * admit finds their reservation in place. Unwound on refusal exactly as admit is.
     */
    public FullAdmitOutcome preAdmit(SubmoduleStep step) {
        StepOrder o = orderOf(step);
        dropStalePreplan(step, o);
        // resources stage the reservation (for clearPreplan to undo) only when they see the flag
        StepContext ctx = step.ctx();
        boolean wasPreplan = ctx.isPreplan();
        ctx.setPreplan(true);
        try {
            return admitOver(o.preplanning(), step);
        } finally {
            ctx.setPreplan(wasPreplan);
        }
    }

    /**
     * Plan the pre-planning resources of {@code step} a step ahead, with {@code ctx.isPreplan()} set so each
     * plans into its pending slot, and record the staged key. Earlier plan results are kept, and these are
     * added for the dependents in the same subset. A failure drops the partial stage on every pre-planning
     * resource.
     *
     * @return key → pending plan result of the pre-planning resources
     */
    public Map<String, Object> prePlan(SubmoduleStep step) {
        StepOrder o = orderOf(step);
        dropStalePreplan(step, o);
        StepContext ctx = step.ctx();
        boolean wasPreplan = ctx.isPreplan();
        ctx.setPreplan(true);
        try {
            Map<String, Object> results = planOver(o.preplanning(), step);
            staged = StagedStep.of(step, o.preplanning());
            stagedFrom = step;
            return results;
        } catch (RuntimeException e) {
            clearPreplan(e);
            throw e;
        } finally {
            ctx.setPreplan(wasPreplan);
        }
    }

    /** Whether a pre-plan is staged and not yet promoted. */
    public boolean staged() {
        return staged != null;
    }

    /** Drop the staged pre-plan on every pre-planning resource, in reverse order, and the record of it. */
    public void clearPreplan() {
        clearPreplan(null);
    }

    // ---------------------------------------------------------------- request sweeps (every node)

    /**
     * Open {@code rid} on every resource, each with its own config ({@code overrides.get(key)}, or null).
     * Idempotent, and all or nothing: if a resource throws, the resources this call opened the rid on,
     * the thrower included (it may have opened part of its state), remove it again in reverse order, and
     * the exception is rethrown. Resources that held the rid before this call keep it.
     */
    public void ingestRequest(String rid, Map<String, ? extends ResourceReqConfig> overrides) {
        Set<String> held = ingested.computeIfAbsent(rid, r -> new HashSet<>());
        List<String> opened = new ArrayList<>();
        for (String key : order) {
            if (!held.contains(key)) {
                opened.add(key);
            }
            try {
                resources.get(key).ingestRequest(rid, overrides == null ? null : overrides.get(key));
            } catch (RuntimeException e) {
                runAll(reversed(opened), k -> resources.get(k).removeRequest(rid), e);
                held.removeAll(opened);
                if (held.isEmpty()) {
                    ingested.remove(rid);
                }
                throw e;
            }
            held.add(key);
        }
    }

    /** Open a capture padding row on every resource. */
    public void ingestCaptureRow(String rid) {
        for (String key : order) {
            resources.get(key).ingestCaptureRow(rid);
        }
    }

    /**
     * Free {@code rid} on every resource, in topological order. Every resource is asked even if one
     * throws; the first failure is rethrown afterwards with the rest suppressed.
     */
    public void removeRequest(String rid) {
        ingested.remove(rid);
        runAll(order, key -> resources.get(key).removeRequest(rid), null);
    }

    // ---------------------------------------------------------------- node sweeps

    /**
     * Bring published state in, over {@code node}'s resources that retrieve, each given
     * {@code published.get(key)}.
     *
     * @return the first refusal, naming its resource; else NOT_READY while any transfer is in flight; else OK
     */
    public FullAdmitOutcome admitRetrieve(String rid, String node, String walk, Map<String, PublishedInfo> published) {
        boolean ready = true;
        for (String key : keysOf(node)) {
            Publication<?> p = as(key, Publication.class);
            if (p == null) {
                continue;
            }
            AdmitOutcome o = retrieve(p, key, rid, node, walk, published == null ? null : published.get(key));
            if (!o.ok()) {
                return new FullAdmitOutcome(o, key);
            }
            ready &= o.ready();
        }
        return ready ? FullAdmitOutcome.OK : FullAdmitOutcome.NOT_READY;
    }

    /**
     * Export durable state after a step of {@code node}: each rid under its own walk
     * ({@code requestWalks.get(rid)}, else {@code walk}).
     *
     * @return rid → key → info; resources with nothing to publish are left out, and so are rids with nothing
     */
    public Map<String, Map<String, PublishedInfo>> publish(List<String> rids, String node, String walk,
                                                           Map<String, String> requestWalks) {
        return perRequest(rids, node, walk, requestWalks,
                (key, p, rid, w) -> p.publishForStep(rid, node, w));
    }

    /** {@link #publish} of what is useful once a dynamic loop has stopped. */
    public Map<String, Map<String, PublishedInfo>> publishAfterStop(List<String> rids, String node, String walk,
                                                                    Map<String, String> requestWalks) {
        return perRequest(rids, node, walk, requestWalks,
                (key, p, rid, w) -> p.publishAfterStop(rid, node, w));
    }

    /**
     * {@link #publish}, deferred: per rid, the cheap snapshot each publisher takes now, finished later by
     * {@link #publishFromSnapshots} for the rids that need it.
     *
     * @return rid → key → snapshot; a rid with nothing to publish has no entry
     */
    public Map<String, Map<String, Object>> publishSnapshot(List<String> rids, String node, String walk,
                                                            Map<String, String> requestWalks) {
        return perRequest(rids, node, walk, requestWalks,
                (key, p, rid, w) -> p.publishSnapshotForStep(rid, node, w));
    }

    /** The published info of {@code rids} from their {@link #publishSnapshot} records, each under its own walk. */
    public Map<String, Map<String, PublishedInfo>> publishFromSnapshots(Map<String, Map<String, Object>> snapshots,
                                                                        List<String> rids, String node, String walk,
                                                                        Map<String, String> requestWalks) {
        return perRequest(rids, node, walk, requestWalks, (key, p, rid, w) -> {
            Object snapshot = snapshots.getOrDefault(rid, Map.of()).get(key);
            return snapshot == null ? null : p.publishFromSnapshot(rid, snapshot, node, w);
        });
    }

    /** Let {@code node}'s resources size the static buffers its captured graphs will read. */
    public void buildAcceleratorGraphBuffers(List<CGSlotSpec> slots, int maxBs, int maxSeqLen, String node) {
        for (String key : keysOf(node)) {
            GraphBuffers g = as(key, GraphBuffers.class);
            if (g != null) {
                g.buildAcceleratorGraphBuffers(slots, maxBs, maxSeqLen);
            }
        }
    }

    /** Key → (allocation count, page-sequence hash) of {@code node}'s resources that keep a trail. */
    public Map<String, long[]> pageTrails(String node) {
        Map<String, long[]> trails = new LinkedHashMap<>();
        for (String key : keysOf(node)) {
            PrefixCaching c = as(key, PrefixCaching.class);
            long[] trail = c == null ? null : c.pageTrail();
            if (trail != null) {
                trails.put(key, trail);
            }
        }
        return trails;
    }

    // ---------------------------------------------------------------- prefix cache

    /**
     * The longest prefix of this walk every resource on {@code node} can serve: the smallest answer, since
     * a step is one span, then cut until every resource can take it on ({@link PrefixCaching#fitCachedPrefix}:
     * recurrent states are kept only at some lengths). A null answer is "no opinion", not zero.
     *
     * @return the agreed prefix, or null when no resource answered
     */
    public CachedPrefix resolveCachedPrefix(String rid, String node, String walk, Map<String, int[]> inputs) {
        CachedPrefix agreed = null;
        for (String key : keysOf(node)) {
            PrefixCaching c = as(key, PrefixCaching.class);
            CachedPrefix p = c == null ? null : c.resolveCachedPrefix(rid, node, walk, inputs);
            if (p != null && (agreed == null || p.tokens() < agreed.tokens())) {
                agreed = p;
            }
        }
        if (agreed == null) {
            return null;
        }
        int tokens = agreed.tokens();
        int before;
        do {
            before = tokens;
            for (String key : keysOf(node)) {
                PrefixCaching c = as(key, PrefixCaching.class);
                if (c != null) {
                    tokens = Math.min(tokens, c.fitCachedPrefix(rid, node, walk, tokens));
                }
            }
        } while (tokens != before);
        return tokens == agreed.tokens() ? agreed : new CachedPrefix(tokens);
    }

    /** Give every resource on {@code node} the agreed prefix (null if none), with the untrimmed inputs. */
    public void applyCachedPrefix(String rid, String node, String walk, Map<String, int[]> inputs,
                                  CachedPrefix prefix) {
        forPrefixCaching(node, c -> c.applyCachedPrefix(rid, node, walk, inputs, prefix));
    }

    /** Tell {@code node}'s resources that the cache served this walk whole; it will never admit or commit. */
    public void completeCachedWalk(String rid, String node, String walk) {
        forPrefixCaching(node, c -> c.completeCachedWalk(rid, node, walk));
    }

    /**
     * On rank 0 of a TP node: lease each resource's cached prefix as the step is sent; the pages travel
     * with the step to the followers.
     *
     * @return key → leased pages; resources with no lease are left out
     */
    public Map<String, List<Integer>> leaseCachedPrefix(String rid, String node, String walk) {
        Map<String, List<Integer>> leases = new LinkedHashMap<>();
        for (String key : keysOf(node)) {
            PrefixCaching c = as(key, PrefixCaching.class);
            List<Integer> pages = c == null ? null : c.leaseCachedPrefix(rid, node, walk);
            if (pages != null) {
                leases.put(key, pages);
            }
        }
        return leases;
    }

    /**
     * On a TP follower: lease the pages rank 0 leased, on each resource {@code leases} names. Every such
     * resource is asked, so each makes progress while another lags; adoption must therefore be idempotent.
     *
     * @return true once every one holds its pages
     */
    public boolean adoptCachedPrefix(String rid, String node, String walk, Map<String, List<Integer>> leases,
                                     boolean caughtUp) {
        boolean held = true;
        for (String key : keysOf(node)) {
            List<Integer> pages = leases.get(key);
            PrefixCaching c = as(key, PrefixCaching.class);
            if (pages != null && c != null) {
                held &= c.adoptCachedPrefix(rid, node, walk, pages, caughtUp);
            }
        }
        return held;
    }

    /** Give back a lease or adoption for a step that will not run. */
    public void releaseCachedPrefix(String rid, String node, String walk) {
        forPrefixCaching(node, c -> c.releaseCachedPrefix(rid, node, walk));
    }

    /** The keys of {@code node}'s resources with a prefix cache open now; usually empty, so callers skip the sweep. */
    public List<String> prefixChainKeys(String node) {
        List<String> keys = new ArrayList<>();
        for (String key : keysOf(node)) {
            PrefixCaching c = as(key, PrefixCaching.class);
            if (c != null && c.keysPrefixChains()) {
                keys.add(key);
            }
        }
        return keys;
    }

    /** Offer one request's sampled tokens (host copy) to {@code node}'s resources with a cache open. */
    public void extendPrefixChains(String rid, String node, String walk, Map<String, int[]> outputs) {
        for (String key : prefixChainKeys(node)) {
            as(key, PrefixCaching.class).extendPrefixChain(rid, node, walk, outputs);
        }
    }

    /**
     * {@link #extendPrefixChains} for a whole step: the open caches are looked up once, and each rid is
     * offered its own outputs under its own walk. Rids without outputs are skipped.
     */
    public void extendPrefixChainsBatch(List<String> rids, String node, Function<String, String> walkOf,
                                        Map<String, Map<String, int[]>> outputs) {
        List<String> keys = prefixChainKeys(node);
        if (keys.isEmpty()) {
            return;
        }
        for (String rid : rids) {
            Map<String, int[]> own = outputs.get(rid);
            if (own == null) {
                continue;
            }
            for (String key : keys) {
                as(key, PrefixCaching.class).extendPrefixChain(rid, node, walkOf.apply(rid), own);
            }
        }
    }

    // ---------------------------------------------------------------- internals

    private FullAdmitOutcome admitOver(List<String> keys, SubmoduleStep step) {
        StepContext ctx = step.ctx();
        boolean ready = true;
        for (int i = 0; i < keys.size(); i++) {
            String key = keys.get(i);
            Admission a = as(key, Admission.class);
            AdmitOutcome outcome;
            try {
                outcome = a == null ? AdmitOutcome.OK : a.admit(step.get(key), ctx);
            } catch (RuntimeException e) {
                rollback(keys.subList(0, i + 1), step, e);
                throw e;
            }
            if (!outcome.ok()) {
                rollback(keys.subList(0, i + 1), step, null);
                return new FullAdmitOutcome(outcome, key);
            }
            ready &= outcome.ready();
        }
        return ready ? FullAdmitOutcome.OK : FullAdmitOutcome.NOT_READY;
    }

    /** rollbackAdmit over {@code reached}, last first; failures are added to {@code cause} when there is one. */
    private void rollback(List<String> reached, SubmoduleStep step, RuntimeException cause) {
        StepContext ctx = step.ctx();
        runAll(reversed(reached), key -> {
            Admission a = as(key, Admission.class);
            if (a != null) {
                a.rollbackAdmit(step.get(key), ctx);
            }
        }, cause);
    }

    private Map<String, Object> planOver(List<String> keys, SubmoduleStep step) {
        StepContext ctx = step.ctx();
        Map<String, Object> results = new LinkedHashMap<>();
        for (String key : keys) {
            Planning<?> p = as(key, Planning.class);
            Object result = p == null ? null : p.plan(step.get(key), ctx);
            // Published before the next resource plans: this is how dependents read it.
            ctx.planResults().put(key, result);
            results.put(key, result);
        }
        return Collections.unmodifiableMap(results);
    }

    /** clearPreplan on every pre-planning resource, last first; failures are added to {@code cause}, if any. */
    private void clearPreplan(RuntimeException cause) {
        try {
            runAll(reversed(order), key -> {
                Preplanning p = as(key, Preplanning.class);
                if (p != null) {
                    p.clearPreplan();
                }
            }, cause);
        } finally {
            staged = null;
            stagedFrom = null;
        }
    }

    /** A staged pre-plan for another step would hand this step another step's plans: undo it. */
    private void dropStalePreplan(SubmoduleStep step, StepOrder o) {
        if (staged != null && step != stagedFrom && !staged.equals(StagedStep.of(step, o.preplanning()))) {
            clearPreplan();
        }
    }

    private StepOrder orderOf(SubmoduleStep step) {
        StepOrder cached = stepOrders.get(step.keys());
        if (cached != null) {
            return cached;
        }
        for (String key : step.keys()) {
            if (!resources.containsKey(key)) {
                throw new IllegalArgumentException("step declares resource '" + key
                        + "', which this runner does not have; it has " + order);
            }
        }
        List<String> all = order.stream().filter(step.keys()::contains).toList();
        StepOrder computed = new StepOrder(all, all.stream().filter(preplanning::contains).toList());
        stepOrders.put(Set.copyOf(step.keys()), computed);
        return computed;
    }

    private List<String> keysOf(String node) {
        if (nodeOrder == null || node == null) {
            return order;
        }
        return nodeOrder.getOrDefault(node, order);
    }

    private <V> Map<String, Map<String, V>> perRequest(List<String> rids, String node, String walk,
                                                       Map<String, String> requestWalks, PerRequest<V> answers) {
        List<String> keys = keysOf(node);
        Map<String, Map<String, V>> byRid = new LinkedHashMap<>();
        for (String rid : rids) {
            String own = requestWalks == null ? walk : requestWalks.getOrDefault(rid, walk);
            Map<String, V> byKey = new LinkedHashMap<>();
            for (String key : keys) {
                Publication<?> publisher = as(key, Publication.class);
                V answer = publisher == null ? null : answers.answer(key, publisher, rid, own);
                if (answer != null) {
                    byKey.put(key, answer);
                }
            }
            if (!byKey.isEmpty()) {
                byRid.put(rid, byKey);
            }
        }
        return byRid;
    }

    private Map<String, List<String>> nodeOrders(Map<String, ? extends Collection<String>> nodeResources) {
        Map<String, List<String>> byNode = new HashMap<>();
        nodeResources.forEach((node, keys) -> {
            for (String key : new TreeSet<>(keys)) {
                if (!resources.containsKey(key)) {
                    throw new IllegalArgumentException("node '" + node + "' lists resource '" + key
                            + "', which this runner does not have; it has " + order);
                }
            }
            byNode.put(node, order.stream().filter(keys::contains).toList());
        });
        return Map.copyOf(byNode);
    }

    /** Pre-planning keys, refusing one whose dependency would still hold the in-flight step's plan. */
    private Set<String> preplanningKeys() {
        Set<String> keys = new HashSet<>();
        for (String key : order) {
            if (as(key, Preplanning.class) == null) {
                continue;
            }
            for (String dep : new TreeSet<>(resources.get(key).dependsOn())) {
                if (as(dep, Preplanning.class) == null) {
                    throw new IllegalArgumentException("resource '" + key + "' pre-plans but its dependency '"
                            + dep + "' does not: a pre-planned step would read the plan of the step in flight");
                }
            }
            keys.add(key);
        }
        return Set.copyOf(keys);
    }

    /** The resource of {@code key} as capability {@code type}; null when it has none. */
    private <C> C as(String key, Class<C> type) {
        return resources.get(key).capability(type).orElse(null);
    }

    private void forPrefixCaching(String node, Consumer<PrefixCaching> action) {
        for (String key : keysOf(node)) {
            PrefixCaching c = as(key, PrefixCaching.class);
            if (c != null) {
                action.accept(c);
            }
        }
    }

    /**
     * Hand {@code published} to {@code p} as the type it publishes.
     *
     * @throws IllegalArgumentException when it is a publication of another type
     */
    private static <P extends PublishedInfo> AdmitOutcome retrieve(Publication<P> p, String key, String rid,
                                                                  String node, String walk, PublishedInfo published) {
        if (published != null && !p.publishedType().isInstance(published)) {
            throw new IllegalArgumentException("resource '" + key + "' retrieves " + p.publishedType().getSimpleName()
                    + ", not " + published.getClass().getSimpleName());
        }
        return p.admitRetrieve(rid, node, walk, p.publishedType().cast(published));
    }

    /**
     * Run {@code action} for every key even when some throw. With a {@code cause}, failures are added to it
     * as suppressed; without, the first is rethrown at the end with the rest suppressed.
     */
    private static void runAll(List<String> keys, Consumer<String> action, RuntimeException cause) {
        RuntimeException first = cause;
        for (String key : keys) {
            try {
                action.accept(key);
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (cause == null && first != null) {
            throw first;
        }
    }

    private static List<String> reversed(List<String> keys) {
        List<String> copy = new ArrayList<>(keys);
        Collections.reverse(copy);
        return copy;
    }
}
