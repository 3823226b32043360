package org.mstar.resources.kv;

import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Where the KV caches of one process meet for a hand-off by handle: a prefill cache lends the pages of a finished
 * prompt under a ticket ({@link KVManager#lendingCodec}), only the ticket travels, and a decode cache claims the
 * ticket and copies the pages device to device, never through the host: pool to pool when both caches are on one
 * device, by the decode cache's device from the other's memory when not ({@code KvPool.copyPagesTo}).
 *
 * <p>Lent pages stay owned by the lender (one owner more per page) until the claimer gives them back, so the lender
 * never reuses them under a copy. A ticket not yet claimed is the lender's to take back when it runs short of pages;
 * a ticket from another shelf (another process) or one taken back is answered with {@link LentPagesGone}, and the
 * receiver recomputes the prompt's KV instead. Thread-safe: the lender and the claimer run on different task threads.
 */
public final class KvShelf {
    /** Names this shelf in every ticket, so a ticket that crossed into another process is recognised. */
    private final String id = UUID.randomUUID().toString();
    private final AtomicLong tickets = new AtomicLong();
    private final Map<Long, KVManager> lenders = new ConcurrentHashMap<>();

    String id() {
        return id;
    }

    long register(KVManager lender) {
        long ticket = tickets.incrementAndGet();
        lenders.put(ticket, lender);
        return ticket;
    }

    /** The lender of {@code ticket}, which leaves the shelf; null for another shelf's or an unknown ticket. */
    KVManager claim(String shelfId, long ticket) {
        return id.equals(shelfId) ? lenders.remove(ticket) : null;
    }

    void forget(long ticket) {
        lenders.remove(ticket);
    }

    /** Tickets lent and not yet claimed or taken back. */
    public int outstanding() {
        return lenders.size();
    }
}
