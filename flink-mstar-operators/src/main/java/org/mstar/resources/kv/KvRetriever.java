package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.RequestOffloading;

/**
 * Publication of streams and their retrieval by another cache (PD disaggregation). A published stream's pages are
 * read through the transport its descriptor names or, when the publication carries them (a decoded hand-off),
 * taken from those bytes.
 *
 * <p>Retrieval is monotonic: a stream never gets shorter because of a publication, so a stale or echoed
 * one is a no-op. Only a change of the producer's reset generation, which says the producer rewound or
 * replaced the stream, resets the local copy. Before pulling, whole pages this cache's prefix index
 * already holds are taken locally, so only the missing tail moves.
 */
final class KvRetriever {
    private final KVState st;
    private final KvTransport transport;
    private final int worldSize;
    private final int rank;
    /** Page bytes brought into this cache by retrievals, through the host. */
    private long retrievedBytes;
    /** Page bytes copied pool to pool on the device from caches that lent them ({@link KvShelf}). */
    private long lentBytesCopied;

    KvRetriever(KVState st, KvTransport transport, int worldSize, int rank) {
        this.st = st;
        this.transport = transport;
        this.worldSize = worldSize;
        this.rank = rank;
    }

    /** This rank's streams {@code labels} of the request; null when none can be published. */
    PublishedKVInfo publish(RequestState r, List<String> labels) {
        PublishedKVInfo info = new PublishedKVInfo(worldSize);
        boolean any = false;
        for (String label : labels) {
            CacheStream s = r.streams.get(label);
            // Offloaded pages are not on the device and a pending read has not landed: nothing to read yet.
            if (s == null || s.offloaded || s.readPending()) {
                continue;
            }
            int[] pages = s.pageIds(0, st.pagesFor(s.storedLen));
            info.put(rank, label, new KVSequenceInfo(s.storedLen, descriptor(), pages, s.resetGeneration));
            any = true;
        }
        return any ? info : null;
    }

    private String descriptor() {
        return transport == null ? "" : transport.descriptor();
    }

    /** The contents of some of this cache's pages, for a reader. */
    KvPagePayload export(int[] pages, int startToken, int endToken) {
        KvPool p = st.pool;
        return new KvPagePayload(p.layers(), pages.length, p.planes(), p.pageSize(), p.kvHeads(), p.headDim(), p.dtype(),
                startToken, endToken, p.gather(pages));
    }

    AdmitOutcome retrieve(RequestState r, List<String> labels, PublishedKVInfo pub) {
        String rid = r.requestId;
        if (pub.worldSize() != worldSize) {
            return terminal(rid, "KV published by a world of " + pub.worldSize() + " ranks cannot be read by one of "
                    + worldSize);
        }
        for (var e : pub.forRank(rank).entrySet()) {
            String label = e.getKey();
            KVSequenceInfo seq = e.getValue();
            if (!labels.contains(label)) {
                continue;
            }
            CacheStream s = st.openStream(rid, label);
            Readiness ready = checkReady(s);
            if (ready == Readiness.FAILED) {
                return terminal(rid, "KV read of " + label + " failed: " + s.readError);
            }
            if (ready == Readiness.PENDING) {
                return AdmitOutcome.NOT_READY;
            }
            boolean own = seq.carried() == null && transport != null && transport.owns(seq.descriptor());
            if (!own) {
                if (s.remoteResetGeneration >= 0 && s.remoteResetGeneration != seq.resetGeneration()) {
                    rewind(s);
                }
                s.remoteResetGeneration = seq.resetGeneration();
            }
            takeLocalMatch(s, seq.seqLen());
            if (seq.seqLen() <= s.storedLen || own) {
                continue;
            }
            AdmitOutcome o = startRead(s, seq);
            if (o != null) {
                return o;
            }
        }
        boolean ready = true;
        for (String label : labels) {
            CacheStream s = r.streams.get(label);
            if (s == null) {
                continue;
            }
            Readiness rd = checkReady(s);
            if (rd == Readiness.FAILED) {
                return terminal(rid, "KV read of " + label + " failed: " + s.readError);
            }
            ready &= rd == Readiness.READY;
        }
        return ready ? AdmitOutcome.OK : AdmitOutcome.NOT_READY;
    }

    private AdmitOutcome startRead(CacheStream s, KVSequenceInfo seq) {
        String rid = s.requestId;
        if (s.offloaded) {
            return AdmitOutcome.refused(new RequestOffloading("stream " + s.label + " of '" + rid + "' is offloaded",
                    s.label, rid));
        }
        int start = s.storedLen;
        int end = seq.seqLen();
        int first = start / st.pageSize;
        int last = (end - 1) / st.pageSize;
        int[] remote = seq.pageIndices();
        CarriedPages carried = seq.carried();
        int held = carried == null ? remote.length : carried.numPages();
        if (held <= last) {
            return terminal(rid, "published " + s.label + " claims " + end + " tokens on " + held + " pages");
        }
        if (carried == null && transport == null) {
            return terminal(rid, "no KV transport to read " + s.label + " of '" + rid + "' from " + seq.descriptor());
        }
        int need = st.pagesFor(end) - s.pages.size();
        if (!st.makeRoom(need)) {
            int shortBy = st.shortfall(need);
            return AdmitOutcome.refused(new AllocationFailed("KV pool short by " + shortBy + " pages to retrieve "
                    + s.label, shortBy, s.label, rid));
        }
        st.topUp(s, end);
        s.readPages = s.pageIds(first, last + 1);
        s.storedLen = end;
        s.generation++;
        if (carried != null && carried.isLent()) {
            lentBytesCopied += carried.copyLent(first, last + 1, st.pool, s.readPages);
            s.readPages = null;
            s.generation++;
        } else if (carried != null) {
            land(s, carried.pages(first, last + 1));
            s.readPages = null;
        } else {
            s.readFuture = transport.read(seq.descriptor(), Arrays.copyOfRange(remote, first, last + 1), start, end);
        }
        return null;
    }

    /** Page bytes brought into this cache by retrievals so far, through the host. */
    long retrievedBytes() {
        return retrievedBytes;
    }

    /** Page bytes copied on the device from lent pages so far. */
    long lentBytesCopied() {
        return lentBytesCopied;
    }

    private enum Readiness { READY, PENDING, FAILED }

    /** Consume a finished read: its pages land; a failure latches. */
    private Readiness checkReady(CacheStream s) {
        if (s.readError != null) {
            return Readiness.FAILED;
        }
        if (s.readFuture == null) {
            return Readiness.READY;
        }
        if (!s.readFuture.isDone()) {
            return Readiness.PENDING;
        }
        try {
            land(s, s.readFuture.join());
        } catch (CompletionException | CancellationException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            s.readError = cause.getClass().getSimpleName() + ": " + cause.getMessage();
        } catch (IllegalArgumentException e) {
            s.readError = e.getMessage();
        }
        s.readFuture = null;
        s.readPages = null;
        return s.readError == null ? Readiness.READY : Readiness.FAILED;
    }

    private void land(CacheStream s, KvPagePayload p) {
        KvPool pool = st.pool;
        if (p.layers() != pool.layers() || p.planes() != pool.planes() || p.pageSize() != pool.pageSize()
                || p.kvHeads() != pool.kvHeads() || p.headDim() != pool.headDim() || p.dtype() != pool.dtype()
                || p.numPages() != s.readPages.length) {
            throw new IllegalArgumentException("payload layout [" + p.layers() + " layers, " + p.numPages() + " pages of "
                    + p.pageSize() + ", " + p.planes() + "x" + p.kvHeads() + "x" + p.headDim() + " " + p.dtype()
                    + "] does not match this cache's [" + pool.layers() + " layers, pages of " + pool.pageSize() + ", "
                    + pool.planes() + "x" + pool.kvHeads() + "x" + pool.headDim() + " " + pool.dtype() + "]");
        }
        land(s, ByteBuffer.wrap(p.data()));
    }

    /** Write a read's pages ({@code [layers, readPages, ...]}) onto the stream's read pages. */
    private void land(CacheStream s, ByteBuffer pages) {
        st.pool.scatter(s.readPages, pages);
        retrievedBytes += pages.remaining();
        s.generation++;
    }

    /** The producer rewound: start the local copy over, never rewinding onto a shared page. */
    private void rewind(CacheStream s) {
        st.dropLease(s);
        if (s.pages.stream().anyMatch(st.arena::isSealed)) {
            st.arena.releaseAll(s.pages);
            s.pages.clear();
        }
        s.storedLen = 0;
        s.released = 0;
        s.protectedPrefix = null;
        s.retention = null;
        s.chain = null;
        s.retrievedLocally = 0;
        s.generation++;
        s.resetGeneration++;
    }

    /** Start an empty stream from whole pages the local index holds, up to {@code seqLen} tokens. */
    private void takeLocalMatch(CacheStream s, int seqLen) {
        if (st.prefix == null || s.chain == null || s.storedLen > 0 || s.offloaded) {
            return;
        }
        List<Integer> matched = st.prefix.match(s.chain, Math.min(seqLen / st.pageSize, s.chain.keyedPages()));
        if (matched.isEmpty()) {
            return;
        }
        for (int p : matched) {
            st.arena.retain(p);
        }
        st.dropLease(s);
        s.lease = matched;
        st.adoptLease(s);
        s.retrievedLocally = s.storedLen;
    }

    private static AdmitOutcome terminal(String rid, String message) {
        return AdmitOutcome.refused(new AdmitRuntimeError(message, Set.of(rid)));
    }
}
