package org.mstar.resources.kv.ring;

import java.util.List;

/**
 * One session's snapshot: its frame clock, and per layer the bytes of its rows (history and tail, in
 * the layer buffer's layout) with the written flag of each row.
 *
 * @param lastFrame the last committed frame, or -1 before the first
 */
public record RingSessionState(int lastFrame, List<byte[]> layerRows, List<boolean[]> layerWritten) {
    public RingSessionState {
        if (lastFrame < -1) throw new IllegalArgumentException("lastFrame must be >= -1, got " + lastFrame);
        if (layerRows.size() != layerWritten.size()) {
            throw new IllegalArgumentException(layerRows.size() + " layers of rows, " + layerWritten.size() + " of flags");
        }
        layerRows = layerRows.stream().map(byte[]::clone).toList();
        layerWritten = layerWritten.stream().map(boolean[]::clone).toList();
    }
}
