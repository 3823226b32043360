package org.mstar.resources;

import java.util.Optional;
import java.util.Set;

/**
 * One object per declared spec (resource key), built once at model load, driven by the {@code StepRunner}
 * through each step. This interface is what every resource is: its dependencies and its per-request lifecycle.
 * What a resource does beyond that it declares by implementing small capabilities, which the runner asks for with
 * {@link #capability}:
 *
 * <ol>
 *   <li>{@link Publication}, on every readiness scan: {@code admitRetrieve} brings published state in,
 *       <b>monotonic</b>; after a step, {@code publish*} exports durable state as the resource's own
 *       {@link PublishedInfo} type.</li>
 *   <li>{@link PrefixCaching}: which leading tokens a cache already holds, and taking them on.</li>
 *   <li>{@link Admission}: reserve capacity for the step's new tokens; fully succeed, or refuse leaving
 *       nothing {@code rollbackAdmit} cannot undo.</li>
 *   <li>{@link Planning}: addressing and metadata, a typed plan the runner stores in {@code ctx.planResults()}
 *       under this resource's key before the next resource plans; {@link Preplanning} to plan a step ahead.</li>
 *   <li>forward: the model reads the resource.</li>
 *   <li>{@link #commit}: record what the step consumed (after the forward is enqueued).</li>
 *   <li>{@link Offload}: move a request's state off the device and back.</li>
 *   <li>{@link GraphBuffers}: size what captured device graphs read.</li>
 *   <li>{@link #removeRequest}: free everything; tolerates unknown ids.</li>
 * </ol>
 * The defaults are the documented no-ops.
 */
public interface Resource {

    /** Keys whose plan results this resource reads; fixes the topological order. */
    default Set<String> dependsOn() {
        return Set.of();
    }

    /**
     * This resource as capability {@code type}, or empty when it has none. By default, the capabilities it
     * implements; a resource whose capability depends on its configuration (a cache without a host pool cannot
     * offload) leaves that one out.
     */
    default <C> Optional<C> capability(Class<C> type) {
        return type.isInstance(this) ? Optional.of(type.cast(this)) : Optional.empty();
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

    /** Record what {@code step} consumed, once its forward is enqueued. */
    default void commit(ResourceStep step, StepContext ctx) {}

    default void cleanup() {}
}
