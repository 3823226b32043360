package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The KV cache's part of a step.
 *
 * <ul>
 *   <li>{@code commit}: whether the step's tokens count (false: written and attended, then overwritten).</li>
 *   <li>{@code combinedLabels}: (source labels...) → plan label, planned label-major as one batch.</li>
 *   <li>{@code preForks} apply at plan (before the forward); {@code postForks} at commit, after the
 *       step's tokens are counted. {@code forkRids} restricts forks to those requests (null = all).</li>
 *   <li>{@code sink}: streams whose writes go to the sink page (nothing reserved or committed).</li>
 *   <li>{@code retention}: FIFO window per stream, adopted on a committing step.</li>
 * </ul>
 */
public final class KVStep extends ResourceStep {
    private final boolean commit;
    private final Map<List<String>, String> combinedLabels;
    private final List<Fork> preForks;
    private final List<Fork> postForks;
    private final Set<String> forkRids;
    private final Set<StreamLabel> sink;
    private final Map<StreamLabel, RetentionPolicy> retention;

    private KVStep(Builder b) {
        super(b.segments);
        this.commit = b.commit;
        this.combinedLabels = Map.copyOf(b.combinedLabels);
        this.preForks = List.copyOf(b.preForks);
        this.postForks = List.copyOf(b.postForks);
        this.forkRids = b.forkRids == null ? null : Set.copyOf(b.forkRids);
        this.sink = Set.copyOf(b.sink);
        this.retention = Map.copyOf(b.retention);
    }

    /** A plain committing step over the default segments. */
    public KVStep() {
        this(new Builder());
    }

    public static Builder builder() {
        return new Builder();
    }

    public boolean commit() { return commit; }
    public Map<List<String>, String> combinedLabels() { return combinedLabels; }
    public List<Fork> preForks() { return preForks; }
    public List<Fork> postForks() { return postForks; }
    public Set<String> forkRids() { return forkRids; }
    public Set<StreamLabel> sink() { return sink; }
    public Map<StreamLabel, RetentionPolicy> retention() { return retention; }

    public static final class Builder {
        private List<Segment> segments;
        private boolean commit = true;
        private Map<List<String>, String> combinedLabels = Map.of();
        private List<Fork> preForks = List.of();
        private List<Fork> postForks = List.of();
        private Set<String> forkRids;
        private Set<StreamLabel> sink = Set.of();
        private Map<StreamLabel, RetentionPolicy> retention = Map.of();

        public Builder segments(List<Segment> v) { segments = v; return this; }
        public Builder commit(boolean v) { commit = v; return this; }
        public Builder combinedLabels(Map<List<String>, String> v) { combinedLabels = v; return this; }
        public Builder preForks(List<Fork> v) { preForks = v; return this; }
        public Builder postForks(List<Fork> v) { postForks = v; return this; }
        public Builder forkRids(Set<String> v) { forkRids = v; return this; }
        public Builder sink(Set<StreamLabel> v) { sink = v; return this; }
        public Builder retention(Map<StreamLabel, RetentionPolicy> v) { retention = v; return this; }

        public KVStep build() { return new KVStep(this); }
    }
}
