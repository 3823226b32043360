package org.mstar.engine;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.mstar.device.Tensor;
import org.mstar.resources.SlotLease;

/**
 * Enqueues a planned step's forward on the model: eagerly, or as its decode bucket's graph replay fed from the
 * host or, for a step launched ahead, from the draw before it on the device. Also hands a harness's logits
 * observer the sampled rows' logits.
 */
final class StepForward {
    private final ModelRunner model;
    /** Null unless decode graphs are on. */
    private final DecodeGraphs graphs;
    private LogitsObserver observer;

    StepForward(ModelRunner model, DecodeGraphs graphs) {
        this.model = model;
        this.graphs = graphs;
    }

    /**
     * Enqueues {@code p}'s forward (planned): its tokens from the host, or, for a step launched ahead, copied on the
     * device from {@code feed}'s draw. Returns the logits of its sampled rows, then of its rows read on the host;
     * an eager step's are the caller's to close.
     */
    Tensor forward(PlannedStep p, InFlightStep feed) {
        SlotLease lease = p.step().ctx().slotLease();
        if (lease == null) {
            try (Tensor ids = model.device().fromInts(p.tokens(), p.tokenCount())) {
                return model.forward(ids, p.outputRows(), p.starting());
            }
        }
        int bs = lease.bucket().bs();
        // every row samples, real rows first: the bucket's leading logits rows are the real ones
        Tensor logits = feed == null ? graphs.forward(bs, p.tokens())
                : graphs.forward(bs, feed.draw().onDevice(), fedRows(p, feed.step()));
        return logits.rows(0, p.sampleRids().size());
    }

    /**
     * For each row of {@code next}, the row of {@code fed}'s draw holding the token it feeds. The staged rows keep
     * the order of the rows they were staged from, so one pass over both finds them.
     */
    private static int[] fedRows(PlannedStep next, PlannedStep fed) {
        List<String> drawn = fed.sampleRids();
        int[] from = new int[next.rows().size()];
        int j = 0;
        for (int i = 0; i < from.length; i++) {
            String id = next.rows().get(i).request().id();
            while (!drawn.get(j).equals(id)) {
                j++;
            }
            from[i] = j++;
        }
        return from;
    }

    ModelRunner model() {
        return model;
    }

    /** {@code observer} (null: none) sees the logits of every sampled row before it is drawn. */
    void observeWith(LogitsObserver observer) {
        this.observer = observer;
    }

    /** Copies the logits of the sampled rows {@code rids} to the host for the observer, if one is set. */
    void observe(List<String> rids, Tensor logits, Map<String, LiveRequest> live) {
        if (observer == null) {
            return;
        }
        float[] all = model.device().toFloats(logits);
        int vocab = model.vocabSize();
        for (int i = 0; i < rids.size(); i++) {
            LiveRequest r = live.get(rids.get(i));
            observer.onLogits(r.id(), r.generated.size(), Arrays.copyOfRange(all, i * vocab, (i + 1) * vocab));
        }
    }
}
