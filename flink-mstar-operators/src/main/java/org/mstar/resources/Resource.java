package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One object per declared spec (resource key), built once at model load, driven by the
 * {@code StepRunner} through each step. Methods in call order; the defaults are the documented no-ops.
 *
 * <ol>
 *   <li>{@link #ingestRequest} when a request arrives: <b>idempotent</b> (put-if-absent).</li>
 *   <li>{@link #admitRetrieve} on every readiness scan: brings published state in, <b>monotonic</b>.</li>
 *   <li>prefix-cache hooks: {@link #resolveCachedPrefix}, {@link #applyCachedPrefix}, {@link #completeCachedWalk}.</li>
 *   <li>{@link #admit}: reserve capacity for the step's new tokens; fully succeed, or refuse leaving
 *       nothing {@link #rollbackAdmit} cannot undo.</li>
 *   <li>{@link #plan}: addressing and metadata; the result is opaque to the runner and stored in
 *       {@code ctx.planResults()} under this resource's key before the next resource plans.</li>
 *   <li>forward: the model reads the resource.</li>
 *   <li>{@link #commit}: record what the step consumed (after the forward is enqueued).</li>
 *   <li>{@link #publish} and friends: export durable state; null when there is nothing to export.</li>
 *   <li>{@link #removeRequest}: free everything; tolerates unknown ids.</li>
 * </ol>
 */
public interface Resource {

    // ---------------------------------------------------------------- dependencies and requests

    /** Keys whose plan results this resource reads; fixes the topological order. */
    default Set<String> dependsOn() {
        return Set.of();
    }

    /** Open state for {@code rid}. Must be idempotent: a second call must not reset anything. */
    default void ingestRequest(String rid, ResourceReqConfig cfg) {}

    /** Open a capture padding row; by default, as a request. */
    default void ingestCaptureRow(String rid) {
        ingestRequest(rid, null);
    }

    /** Clear per-request progress; {@code free} also returns storage. */
    default void resetRequest(String rid, boolean free) {}

    /** Free everything held for {@code rid}. Must tolerate unknown ids. */
    default void removeRequest(String rid) {}

    // ---------------------------------------------------------------- step cycle

    default AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        return AdmitOutcome.OK;
    }

    /**
     * Give back only what this reservation freshly took. Called for every resource a refused step
     * reached, including the one that refused, and for an admitted step that will not run.
     */
    default void rollbackAdmit(ResourceStep step, StepContext ctx) {}

    default Object plan(ResourceStep step, StepContext ctx) {
        return null;
    }

    default void commit(ResourceStep step, StepContext ctx) {}

    /** Whether this resource can plan a step ahead into a pending slot. */
    default boolean supportsPreplan() {
        return false;
    }

    /** Undo the side effects of a staged pre-plan that will not be promoted. */
    default void clearPreplan() {}

    default boolean forceDoubleBuffer() {
        return false;
    }

    default boolean canCapture() {
        return true;
    }

    /** Size what captured replays will read: grow, never shrink, never move what an earlier call sized. */
    default void buildAcceleratorGraphBuffers(List<CGSlotSpec> slots, int maxBs, int maxSeqLen) {}

    /** Fail loudly on state that must be symmetric after capture (e.g. free pages across ranks). */
    default void postWarmupValidate() {}

    default void cleanup() {}

    // ---------------------------------------------------------------- publish / retrieve

    /** Bring in state another node published. Must be monotonic: a stale echo never rewinds. */
    default AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk, PublishedInfo published) {
        return AdmitOutcome.OK;
    }

    /** Whether this resource overrides {@link #admitRetrieve}; the runner sweeps only those. */
    default boolean retrieves() {
        return false;
    }

    default PublishedInfo publish(String rid) {
        return null;
    }

    default PublishedInfo publishForStep(String rid, String nodeName, String graphWalk) {
        return publish(rid);
    }

    default PublishedInfo publishAfterStop(String rid, String nodeName, String graphWalk) {
        return null;
    }

    /** A cheap record of what {@link #publishForStep} would export now; by default the publication itself. */
    default Object publishSnapshotForStep(String rid, String nodeName, String graphWalk) {
        return publishForStep(rid, nodeName, graphWalk);
    }

    default PublishedInfo publishFromSnapshot(String rid, Object snapshot, String nodeName, String graphWalk) {
        return (PublishedInfo) snapshot;
    }

    // ---------------------------------------------------------------- prefix cache

    /** True for resources whose state a prefix skip cannot corrupt (KV, positions, ragged attention). */
    default boolean prefixSkipSafe() {
        return false;
    }

    /** This resource's contribution to the prefix cache's root; null if it cannot affect stored pages. */
    default byte[] fingerprint() {
        return null;
    }

    /** Open whatever this resource keeps across requests, under {@code root}; true if anything opened. */
    default boolean enablePrefixCache(byte[] root, Set<String> walks) {
        return false;
    }

    /** How much of this walk's leading inputs this resource holds; null means "no opinion", not zero. */
    default CachedPrefix resolveCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs) {
        return null;
    }

    /** Take on the prefix every resource agreed to skip (null if none); {@code inputs} are untrimmed. */
    default void applyCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs,
                                   CachedPrefix prefix) {}

    /** The cache served this walk whole; it will never admit or commit. */
    default void completeCachedWalk(String rid, String nodeName, String graphWalk) {}

    /** Whether {@link #extendPrefixChain} can do anything now (a prefix cache is open). */
    default boolean keysPrefixChains() {
        return false;
    }

    /** Take this step's sampled tokens so generated pages can be keyed. */
    default void extendPrefixChain(String rid, String nodeName, String graphWalk, Map<String, int[]> outputs) {}

    /** On rank 0 of a TP node: lease the cached prefix as the step is sent; null when none. */
    default List<Integer> leaseCachedPrefix(String rid, String nodeName, String graphWalk) {
        return null;
    }

    /** On a follower: lease the pages rank 0 leased; false until this rank holds them. */
    default boolean adoptCachedPrefix(String rid, String nodeName, String graphWalk, List<Integer> pages,
                                      boolean caughtUp) {
        return true;
    }

    default void releaseCachedPrefix(String rid, String nodeName, String graphWalk) {}

    /** (allocation count, hash of the page sequence) for TP followers to check; null where none kept. */
    default long[] pageTrail() {
        return null;
    }

    // ---------------------------------------------------------------- eviction

    default boolean supportsEviction() {
        return false;
    }

    default boolean isOffloaded(String rid) {
        return false;
    }

    /** Move the request's state off the device; returns what was reclaimed (0 if nothing moved). */
    default int offload(String rid) {
        return 0;
    }

    /** Bring it back; false (and nothing moved) when it does not fit yet. */
    default boolean reload(String rid) {
        return true;
    }

    default boolean canReload(String rid) {
        return true;
    }

    /** What offload would free; 0 means not an eviction candidate. */
    default int reclaimable(String rid) {
        return 0;
    }

    default double getOffloadPriority(String rid) {
        return reclaimable(rid);
    }
}
