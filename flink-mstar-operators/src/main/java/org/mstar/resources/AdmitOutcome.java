package org.mstar.resources;

/**
 * One resource's answer to admit or admit-retrieve.
 *
 * <ul>
 *   <li>{@code ok=false}: refused, the step must not run; {@code reason} says why.</li>
 *   <li>{@code ok=true, ready=false}: admitted but not yet usable (a read in flight, a reload that
 *       does not fit yet); retry later, nothing is evicted for it.</li>
 * </ul>
 * {@code ready} is meaningful only when {@code ok}.
 */
public record AdmitOutcome(boolean ok, boolean ready, AdmitFailedReason reason) {
    public static final AdmitOutcome OK = new AdmitOutcome(true, true, null);
    public static final AdmitOutcome NOT_READY = new AdmitOutcome(true, false, null);

    public AdmitOutcome {
        if (!ok && reason == null) {
            throw new IllegalArgumentException("a refusal needs a reason");
        }
    }

    public static AdmitOutcome refused(AdmitFailedReason reason) {
        return new AdmitOutcome(false, false, reason);
    }
}
