package org.mstar.resources;

/**
 * A {@link Resource} that exports durable per-request state for another node or worker, and brings such state in.
 *
 * @param <P> what it publishes and retrieves
 */
public interface Publication<P extends PublishedInfo> {

    /** The type of {@code P}, for the runner to hand {@link #admitRetrieve} a publication of it. */
    Class<P> publishedType();

    /** Everything of {@code rid} there is to export; null when nothing. */
    P publish(String rid);

    /** What to export after a step of {@code nodeName} on {@code graphWalk}; by default {@link #publish}. */
    default P publishForStep(String rid, String nodeName, String graphWalk) {
        return publish(rid);
    }

    /** What is useful once a dynamic loop has stopped; null by default. */
    default P publishAfterStop(String rid, String nodeName, String graphWalk) {
        return null;
    }

    /** A cheap record of what {@link #publishForStep} would export now; by default the publication itself. */
    default Object publishSnapshotForStep(String rid, String nodeName, String graphWalk) {
        return publishForStep(rid, nodeName, graphWalk);
    }

    /** The publication a {@link #publishSnapshotForStep} record stands for. */
    default P publishFromSnapshot(String rid, Object snapshot, String nodeName, String graphWalk) {
        return publishedType().cast(snapshot);
    }

    /**
     * Bring in state another node published (null: nothing). Must be monotonic: a stale echo never rewinds.
     *
     * @return OK; NOT_READY while a transfer is in flight; or a refusal
     */
    AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk, P published);
}
