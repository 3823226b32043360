package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The arena's books checked against who actually names each page (a debugging and test aid):
 *
 * <ul>
 *   <li>free ∪ owned = all pages, disjoint;</li>
 *   <li>each page's owner count = the streams, leases, index entries and lends naming it, plus one for the
 *       sink;</li>
 *   <li>every page with more than one owner is sealed, except a lent one: a hand-off lends its stream's partial
 *       last page while the stream still holds it, and the stream is freed in the same engine step;</li>
 *   <li>each stream's frontier page (and any spare page past it) has exactly one owner, or is lent;</li>
 *   <li>the sink page is named by no stream, lease or index entry;</li>
 *   <li>offloaded streams hold no device pages, and host pages are free or held by one offloaded stream.</li>
 * </ul>
 */
final class PageConservation {
    private PageConservation() {}

    static void check(KVState st, HostPagePool host) {
        PageArena arena = st.arena;
        int n = arena.capacity();
        int[] named = new int[n];
        List<String> errors = new ArrayList<>();
        named[PageArena.SINK_PAGE] = 1;
        Set<Integer> lent = new HashSet<>();
        st.lent.forEach((ticket, lend) -> lend.pages.forEach((label, pages) -> {
            for (int p : pages) {
                lent.add(p);
            }
            count(Arrays.stream(pages).boxed().toList(), named, "lend " + ticket + " of " + label, errors);
        }));
        List<Integer> hostHeld = new ArrayList<>();
        for (RequestState r : st.requests.values()) {
            for (CacheStream s : r.streams.values()) {
                String who = "stream " + s.label + " of '" + s.requestId + "'";
                count(s.pages, named, who, errors);
                if (s.lease != null) {
                    count(s.lease, named, who + " (lease)", errors);
                }
                for (int i = s.storedLen / st.pageSize; i < s.pages.size(); i++) {
                    if (arena.numOwners(s.pages.get(i)) != 1 && !lent.contains(s.pages.get(i))) {
                        errors.add(who + ": frontier/spare page " + s.pages.get(i) + " has "
                                + arena.numOwners(s.pages.get(i)) + " owners");
                    }
                }
                if (s.offloaded) {
                    if (!s.pages.isEmpty()) {
                        errors.add(who + " is offloaded but holds device pages " + s.pages);
                    }
                    for (int h : s.hostPages) {
                        hostHeld.add(h);
                    }
                }
            }
        }
        if (st.prefix != null) {
            count(new ArrayList<>(st.prefix.index().pages()), named, "prefix index", errors);
        }
        Set<Integer> free = new HashSet<>();
        for (int p : arena.freeList()) {
            if (!free.add(p)) {
                errors.add("page " + p + " is on the free list twice");
            }
        }
        for (int p = 0; p < n; p++) {
            int owners = arena.numOwners(p);
            if (owners != named[p]) {
                errors.add("page " + p + " has " + owners + " owners but is named " + named[p] + " times");
            }
            if ((owners == 0) != free.contains(p)) {
                errors.add("page " + p + " has " + owners + " owners and is " + (free.contains(p) ? "" : "not ") + "free");
            }
            if (owners > 1 && !arena.isSealed(p) && !lent.contains(p)) {
                errors.add("page " + p + " is shared by " + owners + " owners but not sealed");
            }
        }
        if (host != null) {
            Set<Integer> all = new HashSet<>(host.freeList());
            int total = host.freeList().size();
            for (int h : hostHeld) {
                if (!all.add(h)) {
                    errors.add("host page " + h + " is both free and held, or held twice");
                }
                total++;
            }
            if (total != host.capacity() || all.size() != host.capacity()) {
                errors.add("host pages: " + total + " accounted for, " + host.capacity() + " exist");
            }
        }
        if (!errors.isEmpty()) {
            throw new IllegalStateException("KV pages not conserved:\n  " + String.join("\n  ", errors));
        }
    }

    private static void count(List<Integer> pages, int[] named, String who, List<String> errors) {
        for (int p : pages) {
            if (p == PageArena.SINK_PAGE) {
                errors.add(who + " names the sink page");
            }
            named[p]++;
        }
    }
}
