package org.mstar.resources.kv;

/**
 * One segment as attention sees it after planning: {@code length = storedLen + span} tokens resident
 * (including this step's), of which the last {@code toCompute} are new, on pages {@code pageIdxs}
 * (the stream's high-water page list truncated to {@code ceil(length / pageSize)}; sink rows point at the
 * sink page).
 */
public record SequenceView(String requestId, String label, int length, int toCompute, int[] pageIdxs,
                           long generation, boolean sink) {

    public int numPages() {
        return pageIdxs.length;
    }

    /** Tokens on the last page, in [1, pageSize]; a zero-length view counts one (sink padding). */
    public int lastPageLen(int pageSize) {
        if (length == 0) {
            return 1;
        }
        int r = length % pageSize;
        return r == 0 ? pageSize : r;
    }
}
