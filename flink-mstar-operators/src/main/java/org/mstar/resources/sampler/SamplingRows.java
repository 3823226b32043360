package org.mstar.resources.sampler;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.SamplingBatch;
import org.mstar.device.Tensor;
import org.mstar.resources.SamplingReqConfig;

/**
 * The per-row parameters of one {@link SamplerResource#sample} call, gathered on the host, and the draw
 * that runs them on the device: {@code maskLogits} (structured output's allowed tokens, when a row is
 * constrained), {@code samplingProbs} (penalty, temperature, min-p, filters, stop-id mask) then
 * {@code sampleFromProbs} (Philox at each row's own seed and offset).
 */
final class SamplingRows {
    private final int rows;
    private final float[] temperature;
    private final int[] topK;
    private final float[] topP;
    private final float[] minP;
    private final float[] repetitionPenalty;
    private final int[] topPFirst;
    private final int[] topPMinKeep;
    private final long[] seeds;
    private final long[] offsets;
    /** Per row, the stop ids it masks now, or null. */
    private final int[][] stopIds;
    /** F32 {@code [rows, vocab]} penalty exponents, or null when no row penalises. */
    private final float[] penaltyCounts;

    /**
     * @param states per row, the request's state; null for a row the sampler does not know (a capture
     *               padding row), which draws with the default parameters at seed 0, offset 0
     * @param applyPenalty the step's switch; counts are gathered only when some row also penalises
     */
    SamplingRows(List<SamplingState> states, List<Integer> specStopIds, boolean applyPenalty, int vocab) {
        rows = states.size();
        temperature = new float[rows];
        topK = new int[rows];
        topP = new float[rows];
        minP = new float[rows];
        repetitionPenalty = new float[rows];
        topPFirst = new int[rows];
        topPMinKeep = new int[rows];
        seeds = new long[rows];
        offsets = new long[rows];
        stopIds = new int[rows][];
        boolean anyPenalty = false;
        for (int r = 0; r < rows; r++) {
            SamplingState s = states.get(r);
            SamplingReqConfig c = s == null ? SamplingReqConfig.DEFAULTS : s.config();
            temperature[r] = (float) c.temperature();
            topK[r] = c.topK();
            topP[r] = (float) c.topP();
            minP[r] = (float) c.minP();
            repetitionPenalty[r] = (float) c.repetitionPenalty();
            topPFirst[r] = c.topPFirst() ? 1 : 0;
            topPMinKeep[r] = c.topPMinKeep();
            if (s != null) {
                seeds[r] = s.seed();
                offsets[r] = s.generated();
                stopIds[r] = s.maskedStopIds(specStopIds);
                anyPenalty |= s.penalises();
            }
        }
        // Penalty liveness: with no penalising row the kernel would be the identity, so skip the counts.
        if (applyPenalty && anyPenalty) {
            penaltyCounts = new float[rows * vocab];
            for (int r = 0; r < rows; r++) {
                SamplingState s = states.get(r);
                if (s != null && s.penalises()) {
                    s.addPenaltyCounts(penaltyCounts, r * vocab, vocab);
                }
            }
        } else {
            penaltyCounts = null;
        }
    }

    /**
     * Enqueues the draw of one token per row from {@code logits} F32 {@code [rows, vocab]}.
     *
     * @param allowed null, or the {@code AllowedTokens} bitmask: logits of tokens it leaves out become -inf first (in
     *                place), so no later step can pick them
     * @return the tokens, I32 {@code [rows]} on the device, owned by the caller
     */
    Tensor draw(Device device, Tensor logits, boolean applyFilters, int[] allowed) {
        int vocab = (int) logits.dim(-1);
        List<Tensor> owned = new ArrayList<>();
        try {
            if (allowed != null) {
                Tensor mask = own(owned, device.fromInts(allowed, rows, allowed.length / rows));
                device.ops().maskLogits(logits, mask);
            }
            if (greedyArgmax()) {
                // what the probabilities would give (a one-hot at the lowest-index maximum), in one read of the logits
                Tensor out = device.allocate(DType.I32, rows);
                device.ops().argmax(logits, out);
                return out;
            }
            Tensor temp = own(owned, device.fromFloats(temperature, DType.F32, rows));
            Tensor k = own(owned, device.fromInts(topK, rows));
            Tensor p = own(owned, device.fromFloats(topP, DType.F32, rows));
            Tensor mp = own(owned, device.fromFloats(minP, DType.F32, rows));
            Tensor pen = own(owned, device.fromFloats(repetitionPenalty, DType.F32, rows));
            Tensor first = own(owned, device.fromInts(topPFirst, rows));
            Tensor keep = own(owned, device.fromInts(topPMinKeep, rows));
            Tensor counts = penaltyCounts == null ? null
                    : own(owned, device.fromFloats(penaltyCounts, DType.F32, rows, vocab));
            int[] masks = new int[rows];
            for (int r = 0; r < rows; r++) {
                masks[r] = stopIds[r] == null ? 0 : 1;
            }
            Tensor mask = own(owned, device.fromInts(masks, rows));
            Tensor probs = own(owned, device.allocate(DType.F32, rows, vocab));
            // The batch carries one stop-id list, but rows may mask different ones (per-request extra ids):
            // run each stretch of rows that agrees on its list separately, so no row sees another's ids.
            for (int[] run : stopRuns()) {
                int from = run[0];
                int n = run[1] - from;
                int[] ids = run[2] < 0 ? null : stopIds[run[2]];
                Tensor stops = ids == null ? null : own(owned, device.fromInts(ids, ids.length));
                SamplingBatch batch = new SamplingBatch(n, temp.rows(from, n), k.rows(from, n), p.rows(from, n),
                        mp.rows(from, n), pen.rows(from, n), counts == null ? null : counts.rows(from, n),
                        first.rows(from, n), keep.rows(from, n), mask.rows(from, n), stops, applyFilters);
                device.ops().samplingProbs(logits.rows(from, n), batch, probs.rows(from, n));
            }
            Tensor seedT = own(owned, uploadLongs(device, seeds));
            Tensor offsetT = own(owned, uploadLongs(device, offsets));
            Tensor out = device.allocate(DType.I32, rows);
            try {
                device.ops().sampleFromProbs(probs, seedT, offsetT, out);
            } catch (RuntimeException e) {
                out.close();
                throw e;
            }
            return out;
        } finally {
            // the device frees in stream order: the enqueued draw still reads these
            owned.forEach(Tensor::close);
        }
    }

    /** Every row greedy, unpenalised and masking no stop id: each draw is its row's argmax. */
    private boolean greedyArgmax() {
        if (penaltyCounts != null) {
            return false;
        }
        for (int r = 0; r < rows; r++) {
            if (temperature[r] != 0f || stopIds[r] != null) {
                return false;
            }
        }
        return true;
    }

    /**
     * Maximal stretches of rows whose masking rows agree on their stop ids: {from, to, row whose ids the
     * stretch masks or -1}. Rows that mask nothing join any stretch.
     */
    private List<int[]> stopRuns() {
        List<int[]> runs = new ArrayList<>();
        int from = 0;
        int owner = -1;
        for (int r = 0; r < rows; r++) {
            if (stopIds[r] == null || owner >= 0 && Arrays.equals(stopIds[owner], stopIds[r])) {
                continue;
            }
            if (owner >= 0) {
                runs.add(new int[] {from, r, owner});
                from = r;
            }
            owner = r;
        }
        runs.add(new int[] {from, rows, owner});
        return runs;
    }

    private static Tensor own(List<Tensor> owned, Tensor t) {
        owned.add(t);
        return t;
    }

    private static Tensor uploadLongs(Device device, long[] values) {
        Tensor t = device.allocate(DType.I64, values.length);
        ByteBuffer bytes = ByteBuffer.allocate(values.length * Long.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        bytes.asLongBuffer().put(values);
        device.copyFromHost(bytes, t);
        return t;
    }
}
