package org.mstar.resources.lora;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.AdapterLibrary;
import org.mstar.resources.AdapterReqConfig;
import org.mstar.resources.AdapterSlotsBusy;
import org.mstar.resources.AdapterSpec;
import org.mstar.resources.AdapterTarget;
import org.mstar.resources.AdapterWeights;
import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.BucketKey;
import org.mstar.resources.Planning;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;

/**
 * Per-request adapters on the device, managed as KV pages are: a fixed pool of slots ({@link AdapterSlots}), each
 * holding one adapter's weights in every layer, stacked by slot for {@code ComputeOps.addLora}: per targeted module
 * and layer {@code a [slots, rank, in]} and {@code b [slots, out, rank]}, plus each slot's scale.
 *
 * <p>A request opened with an adapter ({@link AdapterReqConfig}) pins a slot holding it at the first step it is
 * admitted to, loading the adapter from its library when no slot holds it (into a free slot, else in place of the
 * least recently used adapter no running request uses), and keeps the pin until it is removed or reset. When every
 * slot is pinned by other adapters the step is refused with {@link AdapterSlotsBusy} naming the request, which waits.
 *
 * <p>Each plan gives every token of the step its request's slot (-1: the base model) as an I32 tensor, the
 * {@link AdapterPlan}; under a graph lease it is the static buffer of the bucket, so a recorded decode graph reads
 * each step's slots. Not thread-safe: one step loop drives it.
 */
public final class AdapterManager implements Resource, Admission, Planning<AdapterPlan> {
    private final AdapterSpec spec;
    private final AdapterLibrary library;
    private final Device device;
    private final DType dtype;
    private final int rank;
    private final AdapterSlots slots;
    private final Map<String, Tensor[]> aStacks = new LinkedHashMap<>();
    private final Map<String, Tensor[]> bStacks = new LinkedHashMap<>();
    private final Map<String, AdapterTarget> targets = new LinkedHashMap<>();
    private final Tensor scales;
    private final StaticIntBuffers leasedSlots;
    /** The adapter each request was opened with; base-model requests are absent. */
    private final Map<String, String> adapterOf = new HashMap<>();
    /** The slot each admitted request with an adapter holds a pin on. */
    private final Map<String, Integer> pinned = new HashMap<>();
    /** The requests the last admit pinned a slot for, which its rollback unpins. */
    private final List<String> pinnedByLastAdmit = new ArrayList<>();
    private AdapterPlan current = AdapterPlan.NONE;

    /** @param dtype what the stacks store (the model's weight dtype) */
    public AdapterManager(AdapterSpec spec, Device device, DType dtype) {
        this.spec = spec;
        this.library = spec.library();
        this.device = device;
        this.dtype = dtype;
        this.rank = library.maxRank();
        this.slots = new AdapterSlots(spec.slots());
        this.leasedSlots = new StaticIntBuffers(device);
        List<Tensor> made = new ArrayList<>();
        try {
            for (AdapterTarget t : library.targets()) {
                Tensor[] a = new Tensor[library.layers()];
                Tensor[] b = new Tensor[library.layers()];
                for (int l = 0; l < a.length; l++) {
                    a[l] = zeros(made, spec.slots(), rank, t.inFeatures());
                    b[l] = zeros(made, spec.slots(), t.outFeatures(), rank);
                }
                targets.put(t.module(), t);
                aStacks.put(t.module(), a);
                bStacks.put(t.module(), b);
            }
            this.scales = device.zeros(DType.F32, spec.slots());
        } catch (RuntimeException e) {
            made.forEach(Tensor::close);
            throw e;
        }
    }

    private Tensor zeros(List<Tensor> made, long... shape) {
        Tensor t = device.zeros(dtype, shape);
        made.add(t);
        return t;
    }

    // ---------------------------------------------------------------- requests

    /** Records the request's adapter (none without an {@link AdapterReqConfig}); a second ingest changes nothing. */
    @Override
    public void ingestRequest(String rid, ResourceReqConfig cfg) {
        if (cfg instanceof AdapterReqConfig c && !adapterOf.containsKey(rid)) {
            c.validate(spec);
            adapterOf.put(rid, c.adapter());
        }
    }

    @Override
    public void ingestCaptureRow(String rid) {
        // a capture padding row runs with the base model
    }

    /** Gives up the request's pin: until it runs again it is not using its adapter. */
    @Override
    public void resetRequest(String rid, boolean free) {
        unpin(rid);
    }

    @Override
    public void removeRequest(String rid) {
        unpin(rid);
        adapterOf.remove(rid);
    }

    private void unpin(String rid) {
        Integer slot = pinned.remove(rid);
        if (slot != null) {
            slots.release(slot);
        }
    }

    // ---------------------------------------------------------------- step cycle

    /**
     * Pins a slot for every request of the step that runs with an adapter and holds none yet, loading adapters where
     * needed; refused with {@link AdapterSlotsBusy} for the first request whose adapter finds no slot, or with a
     * terminal error for one whose adapter cannot be read.
     */
    @Override
    public AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        pinnedByLastAdmit.clear();
        for (Segment s : step.segments()) {
            String rid = s.requestId();
            String adapter = adapterOf.get(rid);
            if (adapter == null || pinned.containsKey(rid) || ctx.isPaddingRow(rid)) {
                continue;
            }
            AdapterSlots.Grant grant = slots.acquire(adapter);
            if (grant == null) {
                return AdmitOutcome.refused(new AdapterSlotsBusy("all " + slots.size() + " adapter slots hold adapters"
                        + " of running requests; " + rid + " waits for one to load '" + adapter + "'", rid));
            }
            pinned.put(rid, grant.slot());
            pinnedByLastAdmit.add(rid);
            if (grant.load()) {
                try {
                    load(adapter, grant.slot());
                } catch (RuntimeException e) {
                    pinned.remove(rid);
                    pinnedByLastAdmit.remove(rid);
                    slots.discard(grant.slot());
                    return AdmitOutcome.refused(new AdmitRuntimeError("adapter '" + adapter + "' cannot be loaded: "
                            + e.getMessage(), Set.of(rid)));
                }
            }
        }
        return AdmitOutcome.OK;
    }

    /** Unpins what the last admit pinned; the adapters it loaded stay in their slots for the next use. */
    @Override
    public void rollbackAdmit(ResourceStep step, StepContext ctx) {
        pinnedByLastAdmit.forEach(this::unpin);
        pinnedByLastAdmit.clear();
    }

    /** Copies {@code adapter}'s weights into {@code slot}, zero past its rank, and its scale. */
    private void load(String adapter, int slot) {
        AdapterWeights w = library.load(adapter);
        if (w.rank() > rank) {
            throw new IllegalStateException("adapter '" + adapter + "' has rank " + w.rank() + ", above the "
                    + rank + " its library declared");
        }
        for (Map.Entry<String, AdapterTarget> e : targets.entrySet()) {
            String module = e.getKey();
            AdapterTarget t = e.getValue();
            List<float[]> a = w.a().get(module);
            List<float[]> b = w.b().get(module);
            for (int l = 0; l < library.layers(); l++) {
                upload(padRows(a == null ? null : a.get(l), w.rank(), t.inFeatures()), aStacks.get(module)[l], slot);
                upload(padColumns(b == null ? null : b.get(l), w.rank(), t.outFeatures()), bStacks.get(module)[l],
                        slot);
            }
        }
        ByteBuffer scale = ByteBuffer.allocate(Float.BYTES).order(ByteOrder.LITTLE_ENDIAN).putFloat(0, w.scale());
        device.copyFromHost(scale, scales.rows(slot, 1));
    }

    /** {@code lora_A [r, in]} as the slot's {@code [rank, in]}: the rows past r are zero (none when untargeted). */
    private float[] padRows(float[] a, int r, int in) {
        float[] out = new float[rank * in];
        if (a != null) {
            System.arraycopy(a, 0, out, 0, r * in);
        }
        return out;
    }

    /** {@code lora_B [out, r]} as the slot's {@code [out, rank]}: the columns past r are zero. */
    private float[] padColumns(float[] b, int r, int out) {
        float[] padded = new float[out * rank];
        if (b != null) {
            for (int j = 0; j < out; j++) {
                System.arraycopy(b, j * r, padded, j * rank, r);
            }
        }
        return padded;
    }

    private void upload(float[] values, Tensor stack, int slot) {
        try (Tensor host = device.fromFloats(values, dtype, values.length)) {
            device.copy(host, stack.rows(slot, 1).reshape(values.length));
        }
    }

    /**
     * Each planned token's slot, in segment order: its request's pinned slot, or -1 for the base model and padding
     * rows. A step without an adapter row uploads nothing.
     */
    @Override
    public AdapterPlan plan(ResourceStep step, StepContext ctx) {
        List<Segment> segments = step.segments();
        int tokens = segments.stream().mapToInt(Segment::span).sum();
        int[] ids = new int[tokens];
        boolean any = false;
        int at = 0;
        for (Segment s : segments) {
            int slot = ctx.isPaddingRow(s.requestId()) ? -1 : pinned.getOrDefault(s.requestId(), -1);
            any |= slot >= 0;
            for (int i = 0; i < s.span(); i++) {
                ids[at++] = slot;
            }
        }
        current.close();
        current = !any ? AdapterPlan.NONE : place(ids, ctx.slotLease());
        return current;
    }

    private AdapterPlan place(int[] ids, SlotLease lease) {
        if (lease != null && lease.bucket() != null) {
            BucketKey bucket = lease.bucket();
            return new AdapterPlan(leasedSlots.write(new LeasedKey(bucket, lease.slot()), bucket.numTokens(), ids),
                    false);
        }
        return new AdapterPlan(device.fromInts(ids, ids.length), true);
    }

    @Override
    public void cleanup() {
        current.close();
        current = AdapterPlan.NONE;
        leasedSlots.close();
        aStacks.values().forEach(ts -> Arrays.stream(ts).forEach(Tensor::close));
        bStacks.values().forEach(ts -> Arrays.stream(ts).forEach(Tensor::close));
        scales.close();
    }

    // ---------------------------------------------------------------- forward

    /** The last plan: which slot each token of the step runs with. */
    public AdapterPlan current() {
        return current;
    }

    /** Whether some adapter targets {@code module} (a PEFT module name such as {@code q_proj}). */
    public boolean targets(String module) {
        return targets.containsKey(module);
    }

    /** {@code [slots, rank, in]}: every slot's {@code lora_A} of {@code module} in {@code layer}. */
    public Tensor a(String module, int layer) {
        return aStacks.get(module)[layer];
    }

    /** {@code [slots, out, rank]}: every slot's {@code lora_B} of {@code module} in {@code layer}. */
    public Tensor b(String module, int layer) {
        return bStacks.get(module)[layer];
    }

    /** F32 {@code [slots]}: each slot's scale. */
    public Tensor scales() {
        return scales;
    }

    /** The adapters' names, sorted. */
    public List<String> adapters() {
        return library.names();
    }

    /** Device bytes of every slot's weights and scale. */
    public long byteSize() {
        long bytes = scales.byteSize();
        for (Tensor[] stack : aStacks.values()) {
            bytes += Arrays.stream(stack).mapToLong(Tensor::byteSize).sum();
        }
        for (Tensor[] stack : bStacks.values()) {
            bytes += Arrays.stream(stack).mapToLong(Tensor::byteSize).sum();
        }
        return bytes;
    }

    /** Adapters loaded into a slot so far. */
    public long loads() {
        return slots.loads();
    }

    /** Adapters evicted from a slot for another so far. */
    public long evictions() {
        return slots.evictions();
    }

    private record LeasedKey(BucketKey bucket, int slot) {}
}
