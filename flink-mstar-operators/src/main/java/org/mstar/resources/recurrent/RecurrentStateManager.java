package org.mstar.resources.recurrent;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.mstar.device.Device;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.BucketKey;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.Offload;
import org.mstar.resources.Planning;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.Publication;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.PrefixKeys;

/**
 * The per-request recurrent state of a model's Mamba2 layers ({@link RecurrentStateSpec}): a fixed pool of device
 * slots ({@link StatePool}, {@link StateSlots}), one per running request, whatever its length.
 *
 * <ul>
 *   <li>A request takes the lowest free slot, zeroed, at the first step it is admitted to and keeps it until it is
 *       removed, reset with {@code free} or offloaded; a step whose requests find no free slot is refused with
 *       {@link AllocationFailed} and everything that admit took is given back, so the pool is as before.</li>
 *   <li>Slot 0 is the scratch of capture padding rows: they are planned at it, reserve and commit nothing, and a step
 *       with padding rows zeroes it first, so what a padding row reads is always the state before any token.</li>
 *   <li>Each plan gives every segment its slot and its first token as I32 tensors ({@link RecurrentPlan}); under a
 *       graph lease they are the bucket's static buffers, so a recorded decode graph reads each step's slots at a
 *       fixed address.</li>
 *   <li>Commit advances each request's token count by its segment's span: the state is the one after that many
 *       tokens, which is what a publication and an offloaded copy say.</li>
 *   <li>{@link Offload} (only with {@code host_slots > 0}) moves a state to host memory and frees its slot; a reload
 *       puts the same bytes into a free slot. A recompute instead resets the request: state dropped, count 0.</li>
 *   <li>{@link PrefixCaching} (only with snapshot slots, {@link RecurrentStateSpec#withSnapshots}): a commit that
 *       leaves a request's state after a multiple of the snapshot interval of its prompt copies the state into a
 *       snapshot slot ({@link SnapshotPool}, least recently used evicted), keyed by the KV prefix cache's key of the
 *       page ending there, rooted as the KV pages are. A probe answers the longest prefix with a snapshot; the
 *       request then starts from a copy of it (pinned until the step that runs on it commits), its count that
 *       prefix's length. Steps must end at those multiples for the snapshots to be taken there.</li>
 * </ul>
 * Not thread-safe: one step loop drives it.
 */
public final class RecurrentStateManager implements Resource, Admission, Planning<RecurrentPlan>, Offload,
        Publication<PublishedRecurrentState>, PrefixCaching {
    private final RecurrentStateSpec spec;
    private final Device device;
    private final StateSlots slots;
    private final StatePool pool;
    private final StaticIntBuffers leasedSlots;
    private final PublishedRecurrentCodec codec;
    /** Tokens each ingested request's state has absorbed. */
    private final Map<String, Integer> tokens = new HashMap<>();
    private final Map<String, Integer> slotOf = new HashMap<>();
    /** Offloaded states, by request: host copies of what their slot held. */
    private final Map<String, byte[]> offloaded = new HashMap<>();
    /** The requests the last admit gave a slot, which its rollback takes back. */
    private final List<String> admittedByLastAdmit = new ArrayList<>();
    /** The prefix cache's snapshots; null without snapshot slots. */
    private final SnapshotPool snapshots;
    /** The prefix cache's root once it is open, else null. */
    private byte[] root;
    /** The walks the prefix cache keys. */
    private Set<String> keyedWalks = Set.of();
    /** Each probed request's rooted keys of its prompt's snapshot points: the i-th after (i + 1) intervals. */
    private final Map<String, List<byte[]>> snapshotKeys = new HashMap<>();
    /** The pinned snapshot slot each request starts from, until the step that runs on it commits. */
    private final Map<String, Integer> attached = new HashMap<>();
    private RecurrentPlan current;
    /** The last plan's segment starts, on the host. */
    private int[] currentStarts = new int[] {0};

    public RecurrentStateManager(RecurrentStateSpec spec, Device device) {
        this.spec = spec;
        this.device = device;
        this.slots = new StateSlots(spec.slots());
        this.pool = new StatePool(device, spec);
        this.leasedSlots = new StaticIntBuffers(device);
        this.codec = new PublishedRecurrentCodec(spec);
        this.snapshots = spec.snapshotSlots() == 0 ? null : new SnapshotPool(spec.slots(), spec.snapshotSlots());
    }

    /** Without host slots there is nowhere to offload to, so no {@link Offload}; without snapshot slots no cache. */
    @Override
    public <C> Optional<C> capability(Class<C> type) {
        if ((type == Offload.class && spec.hostSlots() == 0) || (type == PrefixCaching.class && snapshots == null)) {
            return Optional.empty();
        }
        return Resource.super.capability(type);
    }

    // ---------------------------------------------------------------- requests

    @Override
    public void ingestRequest(String rid, ResourceReqConfig cfg) {
        tokens.putIfAbsent(rid, 0);
    }

    @Override
    public void ingestCaptureRow(String rid) {
        // a capture padding row holds nothing: it runs on the scratch slot
    }

    /** The state goes back to the one before any token; {@code free} also gives up the slot (a recompute). */
    @Override
    public void resetRequest(String rid, boolean free) {
        if (!tokens.containsKey(rid)) {
            return;
        }
        tokens.put(rid, 0);
        offloaded.remove(rid);
        detach(rid);
        Integer slot = slotOf.get(rid);
        if (slot == null) {
            return;
        }
        if (free) {
            slots.release(slotOf.remove(rid));
        } else {
            pool.zero(slot);
        }
    }

    @Override
    public void removeRequest(String rid) {
        Integer slot = slotOf.remove(rid);
        if (slot != null) {
            slots.release(slot);
        }
        offloaded.remove(rid);
        tokens.remove(rid);
        detach(rid);
        snapshotKeys.remove(rid);
    }

    /** Gives back the pin of the snapshot {@code rid} was to start from, if any. */
    private void detach(String rid) {
        Integer from = attached.remove(rid);
        if (from != null) {
            snapshots.unpin(from);
        }
    }

    // ---------------------------------------------------------------- step cycle

    /** Gives a zeroed slot to every request of the step that holds none; refused, with nothing kept, when short. */
    @Override
    public AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        admittedByLastAdmit.clear();
        for (Segment s : step.segments()) {
            String rid = s.requestId();
            if (ctx.isPaddingRow(rid) || slotOf.containsKey(rid)) {
                continue;
            }
            if (!tokens.containsKey(rid)) {
                giveBackLastAdmit();
                return AdmitOutcome.refused(new AdmitRuntimeError("request '" + rid + "' was never ingested by "
                        + spec.resourceKey(), Set.of(rid)));
            }
            if (offloaded.containsKey(rid)) {
                throw new IllegalStateException("request '" + rid + "' is offloaded from " + spec.resourceKey()
                        + ": it must be reloaded before it runs");
            }
            int slot = slots.acquire();
            if (slot < 0) {
                int missing = shortOf(step, ctx);
                giveBackLastAdmit();
                return AdmitOutcome.refused(new AllocationFailed("all " + (slots.capacity() - 1) + " recurrent state"
                        + " slots of " + spec.resourceKey() + " are held; " + missing + " more needed", missing,
                        spec.label(), rid));
            }
            Integer from = attached.get(rid);
            if (from != null) {
                pool.copy(from, slot);
            } else {
                pool.zero(slot);
            }
            slotOf.put(rid, slot);
            admittedByLastAdmit.add(rid);
        }
        return AdmitOutcome.OK;
    }

    /** The step's requests still without a slot, now that none is free. */
    private int shortOf(ResourceStep step, StepContext ctx) {
        return Math.toIntExact(step.segments().stream().map(Segment::requestId)
                .filter(rid -> ctx.isRealRow(rid) && !slotOf.containsKey(rid)).distinct().count());
    }

    @Override
    public void rollbackAdmit(ResourceStep step, StepContext ctx) {
        giveBackLastAdmit();
    }

    private void giveBackLastAdmit() {
        admittedByLastAdmit.forEach(rid -> slots.release(slotOf.remove(rid)));
        admittedByLastAdmit.clear();
    }

    /**
     * Every segment's slot, in segment order; padding rows at the scratch slot, which this zeroes first. Null for a
     * step without segments.
     */
    @Override
    public RecurrentPlan plan(ResourceStep step, StepContext ctx) {
        List<Segment> segments = step.segments();
        if (segments.isEmpty()) {
            return null;
        }
        int[] ids = new int[segments.size()];
        int[] starts = new int[segments.size() + 1];
        boolean padded = false;
        for (int i = 0; i < ids.length; i++) {
            starts[i + 1] = starts[i] + segments.get(i).span();
            String rid = segments.get(i).requestId();
            if (ctx.isPaddingRow(rid)) {
                ids[i] = StateSlots.SCRATCH;
                padded = true;
                continue;
            }
            Integer slot = slotOf.get(rid);
            if (slot == null) {
                throw new IllegalStateException("request '" + rid + "' is planned in " + spec.resourceKey()
                        + " without a state slot: it was not admitted");
            }
            ids[i] = slot;
        }
        if (padded) {
            pool.zero(StateSlots.SCRATCH);
        }
        if (current != null) {
            current.close();
        }
        currentStarts = starts;
        current = place(ids, starts, ctx.slotLease());
        return current;
    }

    private RecurrentPlan place(int[] ids, int[] starts, SlotLease lease) {
        if (lease != null && lease.bucket() != null) {
            BucketKey bucket = lease.bucket();
            return new RecurrentPlan(leasedSlots.write(new LeasedKey(bucket, lease.slot(), false), bucket.bs(), ids),
                    leasedSlots.write(new LeasedKey(bucket, lease.slot(), true), bucket.bs() + 1, starts), false);
        }
        return new RecurrentPlan(device.fromInts(ids, ids.length), device.fromInts(starts, starts.length), true);
    }

    /**
     * Each real request's state is now the one after its segment's tokens too; one that now stands at a snapshot
     * point of its prompt is copied into a snapshot slot (unless one is kept under its key, or every one is pinned).
     */
    @Override
    public void commit(ResourceStep step, StepContext ctx) {
        for (Segment s : step.segments()) {
            String rid = s.requestId();
            if (!ctx.isRealRow(rid) || !tokens.containsKey(rid)) {
                continue;
            }
            int n = tokens.merge(rid, s.span(), Integer::sum);
            detach(rid);
            List<byte[]> keys = root == null ? null : snapshotKeys.get(rid);
            if (keys != null && n % spec.snapshotInterval() == 0 && n / spec.snapshotInterval() <= keys.size()) {
                int to = snapshots.claim(keys.get(n / spec.snapshotInterval() - 1));
                if (to >= 0) {
                    pool.copy(slotOf.get(rid), to);
                }
            }
        }
        admittedByLastAdmit.clear();
    }

    @Override
    public void cleanup() {
        if (current != null) {
            current.close();
            current = null;
        }
        leasedSlots.close();
        pool.close();
    }

    // ---------------------------------------------------------------- offload

    @Override
    public boolean isOffloaded(String rid) {
        return offloaded.containsKey(rid);
    }

    /** Copies the state to host memory and frees its slot; 0 when it holds none or host memory is full. */
    @Override
    public int offload(String rid) {
        if (reclaimable(rid) == 0) {
            return 0;
        }
        int slot = slotOf.remove(rid);
        offloaded.put(rid, pool.read(slot));
        slots.release(slot);
        return 1;
    }

    /** Puts the offloaded bytes into a free slot; false, with nothing moved, when none is free. */
    @Override
    public boolean reload(String rid) {
        byte[] state = offloaded.get(rid);
        if (state == null) {
            return true;
        }
        int slot = slots.acquire();
        if (slot < 0) {
            return false;
        }
        pool.write(slot, state);
        slotOf.put(rid, slot);
        offloaded.remove(rid);
        return true;
    }

    @Override
    public boolean canReload(String rid) {
        return !offloaded.containsKey(rid) || slots.free() > 0;
    }

    /** One slot for a request holding one, while host memory has room for its state. */
    @Override
    public int reclaimable(String rid) {
        return slotOf.containsKey(rid) && offloaded.size() < spec.hostSlots() ? 1 : 0;
    }

    // ---------------------------------------------------------------- publication

    @Override
    public Class<PublishedRecurrentState> publishedType() {
        return PublishedRecurrentState.class;
    }

    /** The request's state and its token count; null before its first token. */
    @Override
    public PublishedRecurrentState publish(String rid) {
        int n = tokens.getOrDefault(rid, 0);
        if (n == 0) {
            return null;
        }
        byte[] host = offloaded.get(rid);
        Integer slot = slotOf.get(rid);
        return new PublishedRecurrentState(n, host != null ? host : pool.read(slot != null ? slot : attached.get(rid)));
    }

    /**
     * Takes on a published state after more tokens than this side's; one after as many or fewer (a stale echo)
     * changes nothing. A request holding no slot takes one, refused with {@link AllocationFailed} when none is free.
     */
    @Override
    public AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk,
                                      PublishedRecurrentState published) {
        if (published == null) {
            return AdmitOutcome.OK;
        }
        Integer have = tokens.get(rid);
        if (have == null) {
            return AdmitOutcome.refused(new AdmitRuntimeError("request '" + rid + "' was never ingested by "
                    + spec.resourceKey(), Set.of(rid)));
        }
        if (published.tokens() <= have) {
            return AdmitOutcome.OK;
        }
        if (published.bytes().length != pool.stateBytes()) {
            return AdmitOutcome.refused(new AdmitRuntimeError("a published recurrent state of "
                    + published.bytes().length + " bytes, " + spec.resourceKey() + " holds " + pool.stateBytes(),
                    Set.of(rid)));
        }
        if (offloaded.containsKey(rid)) {
            offloaded.put(rid, published.state());
        } else {
            Integer slot = slotOf.get(rid);
            if (slot == null) {
                slot = slots.acquire();
                if (slot < 0) {
                    return AdmitOutcome.refused(new AllocationFailed("no free recurrent state slot in "
                            + spec.resourceKey() + " to take on " + rid + "'s state", 1, spec.label(), rid));
                }
                slotOf.put(rid, slot);
            }
            pool.write(slot, published.bytes());
        }
        tokens.put(rid, published.tokens());
        return AdmitOutcome.OK;
    }

    /** How this resource's publications cross a process. */
    public PublishedRecurrentCodec codec() {
        return codec;
    }

    // ---------------------------------------------------------------- prefix cache

    /** The geometry, dtypes and snapshot keying: anything that changes what a snapshot means. */
    @Override
    public byte[] fingerprint() {
        return PrefixKeys.fingerprint("recurrent", spec.layers(), spec.ssmDType(), spec.convDType(),
                spec.snapshotInterval(), spec.pageSize());
    }

    /** Opens the snapshot cache under {@code root} (the KV prefix cache's), keying prompts of {@code walks}. */
    @Override
    public boolean enablePrefixCache(byte[] root, Set<String> walks) {
        this.root = root.clone();
        this.keyedWalks = Set.copyOf(walks);
        return true;
    }

    /**
     * Keys the prompt's snapshot points (every interval up to its last token, which always runs) and answers the
     * longest with a snapshot kept, 0 when none. Null (no opinion) when the cache is closed, the walk is not keyed or
     * the request already holds a state. {@code inputs} is the walk's one input, the prompt.
     */
    @Override
    public CachedPrefix resolveCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs) {
        if (root == null || !keyedWalks.contains(graphWalk) || inputs.size() != 1 || tokens.getOrDefault(rid, -1) != 0
                || slotOf.containsKey(rid)) {
            return null;
        }
        int[] prompt = inputs.values().iterator().next();
        int interval = spec.snapshotInterval();
        int points = (prompt.length - 1) / interval;
        List<byte[]> pageKeys = PrefixKeys.chain(Arrays.copyOf(prompt, points * interval), spec.pageSize());
        List<byte[]> keys = new ArrayList<>(points);
        for (int i = 1; i <= points; i++) {
            keys.add(PrefixKeys.rooted(root, pageKeys.get(i * interval / spec.pageSize() - 1)));
        }
        snapshotKeys.put(rid, keys);
        return new CachedPrefix(fitCachedPrefix(rid, nodeName, graphWalk, prompt.length));
    }

    /** The longest snapshot point of at most {@code tokens} with a snapshot kept; 0 when none. */
    @Override
    public int fitCachedPrefix(String rid, String nodeName, String graphWalk, int tokens) {
        List<byte[]> keys = snapshotKeys.getOrDefault(rid, List.of());
        for (int i = Math.min(keys.size(), tokens / spec.snapshotInterval()); i > 0; i--) {
            if (snapshots.holds(keys.get(i - 1))) {
                return i * spec.snapshotInterval();
            }
        }
        return 0;
    }

    /** Pins the snapshot at the agreed prefix, which the request's slot starts as; its count is that prefix. */
    @Override
    public void applyCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs,
                                  CachedPrefix prefix) {
        List<byte[]> keys = snapshotKeys.get(rid);
        if (prefix == null || prefix.tokens() == 0 || keys == null) {
            return;
        }
        int at = prefix.tokens() / spec.snapshotInterval();
        int from = at * spec.snapshotInterval() == prefix.tokens() && at <= keys.size()
                ? snapshots.pin(keys.get(at - 1)) : -1;
        if (from < 0) {
            throw new IllegalStateException("request '" + rid + "' was agreed a prefix of " + prefix.tokens()
                    + " tokens, at which " + spec.resourceKey() + " keeps no snapshot");
        }
        detach(rid);
        attached.put(rid, from);
        tokens.put(rid, prefix.tokens());
    }

    /** Snapshots kept now. */
    public int snapshotsKept() {
        return snapshots == null ? 0 : snapshots.kept();
    }

    // ---------------------------------------------------------------- forward and observation

    /** Layer {@code i} (in declared order)'s SSM states, {@code [slots, heads, headDim, stateDim]}. */
    public Tensor ssmStates(int i) {
        return pool.ssm(i);
    }

    /** Layer {@code i} (in declared order)'s convolution windows, {@code [slots, convDim, convKernel - 1]}. */
    public Tensor convStates(int i) {
        return pool.conv(i);
    }

    /** The last plan; null before the first. */
    public RecurrentPlan current() {
        return current;
    }

    /**
     * The last plan's segment starts on the host, as {@link RecurrentPlan#starts()} holds them on the device: where
     * a forward finds each segment's last token without reading the device.
     */
    public int[] currentStarts() {
        return currentStarts.clone();
    }

    /** The tokens {@code rid}'s state has absorbed; 0 for an unknown request. */
    public int tokens(String rid) {
        return tokens.getOrDefault(rid, 0);
    }

    /** The slot {@code rid} holds, or -1. */
    public int slotOf(String rid) {
        return slotOf.getOrDefault(rid, -1);
    }

    /** Slots a request could take now. */
    public int freeSlots() {
        return slots.free();
    }

    /** Slots requests hold. */
    public int usedSlots() {
        return slots.used();
    }

    /** Slots in all, the scratch included. */
    public int capacity() {
        return slots.capacity();
    }

    /** Device bytes of every slot's state. */
    public long byteSize() {
        return pool.byteSize();
    }

    /** The storage itself, for this package's tests to read and write states as a forward would. */
    StatePool pool() {
        return pool;
    }

    /** A graph's static buffer: its slots, or with {@code starts} its segment starts. */
    private record LeasedKey(BucketKey bucket, int slot, boolean starts) {}
}
