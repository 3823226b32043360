package org.mstar.engine;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.mstar.resources.kv.KvPagePayload;
import org.mstar.resources.kv.KvTransport;

/**
 * The KV manager's transport in a disaggregated engine. On the prefill side it keeps the manager's page source,
 * so a finished prefill's pages can be exported into a {@link PrefillHandoff}. On the decode side the payload of a
 * received hand-off is offered under a descriptor of its own ({@link #offer}), and the manager's retrieval reads from
 * it only the pages its prefix cache did not already hold; what was read is counted.
 */
final class HandoffKvTransport implements KvTransport {
    private static final String PREFIX = "handoff:";

    private KvPageSource source;
    private final Map<String, KvPagePayload> offered = new HashMap<>();
    /** Per offered descriptor: the first token read, once a read happened. */
    private final Map<String, Integer> readFrom = new HashMap<>();
    private long bytesCopied;

    @Override
    public String descriptor() {
        return "handoff-reader";
    }

    @Override
    public void bind(KvPageSource source) {
        this.source = source;
    }

    /** The contents of some of this cache's pages (the prefill side's export). */
    KvPagePayload export(int[] pages, int startToken, int endToken) {
        return source.readPages(pages, startToken, endToken);
    }

    /** Offer a hand-off's stream for reading; returns the descriptor its published sequence names. */
    String offer(String requestId, String label, KvPagePayload payload) {
        String d = PREFIX + requestId + "/" + label;
        offered.put(d, payload);
        readFrom.remove(d);
        return d;
    }

    /** Forget an offered stream; returns the first token read from it, or -1 when nothing was read. */
    int withdraw(String descriptor) {
        offered.remove(descriptor);
        Integer from = readFrom.remove(descriptor);
        return from == null ? -1 : from;
    }

    /** Page bytes copied into this cache from hand-offs so far. */
    long bytesCopied() {
        return bytesCopied;
    }

    /** {@code remotePages} index the offered payload's pages, which are in sequence order from page 0. */
    @Override
    public CompletableFuture<KvPagePayload> read(String descriptor, int[] remotePages, int startToken, int endToken) {
        KvPagePayload p = offered.get(descriptor);
        if (p == null) {
            return CompletableFuture.failedFuture(new IllegalStateException("no hand-off offered as '" + descriptor + "'"));
        }
        long pageBytes = (long) 2 * p.pageSize() * p.kvHeads() * p.headDim() * p.dtype().bytes();
        byte[] out = new byte[Math.toIntExact(pageBytes * p.layers() * remotePages.length)];
        int at = 0;
        for (int layer = 0; layer < p.layers(); layer++) {
            for (int page : remotePages) {
                if (page < 0 || page >= p.numPages()) {
                    return CompletableFuture.failedFuture(new IllegalArgumentException("page " + page
                            + " outside the " + p.numPages() + " pages of hand-off '" + descriptor + "'"));
                }
                System.arraycopy(p.data(), Math.toIntExact((layer * (long) p.numPages() + page) * pageBytes), out, at,
                        (int) pageBytes);
                at += (int) pageBytes;
            }
        }
        readFrom.merge(descriptor, startToken, Math::min);
        bytesCopied += out.length;
        return CompletableFuture.completedFuture(new KvPagePayload(p.layers(), remotePages.length, p.pageSize(),
                p.kvHeads(), p.headDim(), p.dtype(), startToken, endToken, out));
    }
}
