package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The scan's launch bounds, computed from the token and segment counts alone, hold whatever lengths the segments
 * have: mamba_ssd_pieces never lays out more pieces, inner pieces, long segments or workspace slots than the
 * launcher sized its grids and buffers for.
 */
class ScanPiecesPropertiesTest {
    @Property
    void theBoundsHoldForAnySegmentLengths(
            @ForAll @Size(min = 1, max = 60) List<@IntRange(min = 0, max = 3000) Integer> lengths) {
        int piece = CudaStateSpace.PIECE_TOKENS;
        long tokens = 0;
        long pieces = 0;
        long inner = 0;
        long multi = 0;
        long slots = 0;
        for (int len : lengths) {
            long count = (len + piece - 1) / piece;
            tokens += len;
            pieces += count;
            if (count > 1) {
                inner += count - 1;
                multi++;
                slots += count;
            }
        }
        CudaStateSpace.ScanPieces bounds = CudaStateSpace.ScanPieces.of(tokens, lengths.size());

        assertThat(pieces).isLessThanOrEqualTo(bounds.pieces());
        assertThat(inner).isLessThanOrEqualTo(bounds.innerPieces());
        assertThat(multi).isLessThanOrEqualTo(bounds.multiPieceSegments());
        assertThat(slots).isLessThanOrEqualTo(bounds.workSlots());
    }
}
