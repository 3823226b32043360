package org.mstar.resources;

import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Per-step facts every resource may read: the batch's request ids, the graph walk, the slot, capture
 * and pre-plan flags, and {@link #planResults()}, through which a resource reads the plans of the
 * resources it depends on (the runner fills it in topological order).
 *
 * <p>For a replay padded to a captured bucket, {@link #paddedRequestIds()} holds the real ids
 * followed by dummy ids; a resource must reserve, address and commit nothing for a padding row.
 */
public final class StepContext {
    private final List<String> requestIds;
    private final String graphWalk;
    private final int slot;
    private final boolean capture;
    private boolean isPreplan;
    private final Map<String, Object> planResults = new HashMap<>();
    private SlotLease slotLease;
    private Map<String, SlotLease> piecewiseLeases = Map.of();
    private List<String> paddedRequestIds;
    private final Set<String> realRids;
    private final Map<String, String> requestWalks;
    private final boolean forcePrefill;

    public StepContext(List<String> requestIds, String graphWalk, int slot, boolean capture) {
        this(requestIds, graphWalk, slot, capture, Map.of(), false);
    }

    public StepContext(List<String> requestIds, String graphWalk, int slot, boolean capture,
                       Map<String, String> requestWalks, boolean forcePrefill) {
        this.requestIds = List.copyOf(requestIds);
        this.graphWalk = graphWalk;
        this.slot = slot;
        this.capture = capture;
        this.realRids = new LinkedHashSet<>(this.requestIds);
        this.requestWalks = Map.copyOf(requestWalks);
        this.forcePrefill = forcePrefill;
    }

    public List<String> requestIds() { return requestIds; }
    public String graphWalk() { return graphWalk; }
    public int slot() { return slot; }
    public boolean capture() { return capture; }
    public boolean isPreplan() { return isPreplan; }
    public void setPreplan(boolean preplan) { this.isPreplan = preplan; }
    public boolean forcePrefill() { return forcePrefill; }

    /** Plan results by resource key; mutable so the runner can publish each plan before the next runs. */
    public Map<String, Object> planResults() { return planResults; }

    /**
     * The plan resource {@code key} made in this step, as its {@code type}: how a resource reads the plan of one it
     * depends on ({@link Planning} types each resource's own plan; this types the dependent's read).
     *
     * @param reader what needs the plan, for the message
     * @throws IllegalStateException naming the key and what was found, when it holds no plan of that type
     */
    public <P> P planOf(String key, Class<P> type, String reader) {
        Object plan = planResults.get(key);
        if (type.isInstance(plan)) {
            return type.cast(plan);
        }
        throw new IllegalStateException(reader + " needs the plan of resource '" + key + "' ("
                + type.getSimpleName() + ") in this step, found " + (plan == null ? "none" : plan.getClass().getName()));
    }

    public SlotLease slotLease() { return slotLease; }
    public void setSlotLease(SlotLease lease) { this.slotLease = lease; }
    public Map<String, SlotLease> piecewiseLeases() { return piecewiseLeases; }
    public void setPiecewiseLeases(Map<String, SlotLease> leases) { this.piecewiseLeases = Map.copyOf(leases); }

    /** Real ids followed by padding ids for a padded replay; the real ids otherwise. */
    public List<String> paddedRequestIds() {
        return paddedRequestIds == null ? requestIds : paddedRequestIds;
    }

    public void setPaddedRequestIds(List<String> padded) {
        this.paddedRequestIds = padded == null ? null : List.copyOf(padded);
    }

    /** Whether {@code rid} is one of this step's real requests. */
    public boolean isRealRow(String rid) {
        return realRids.contains(rid);
    }

    /** Whether {@code rid} is a replay's padding row rather than a real request. */
    public boolean isPaddingRow(String rid) {
        return !realRids.contains(rid);
    }

    /** The walk {@code rid} runs under: its own under a combined walk, else the step's. */
    public String walkOf(String rid) {
        return requestWalks.getOrDefault(rid, graphWalk);
    }

    public Map<String, String> requestWalks() { return requestWalks; }
}
