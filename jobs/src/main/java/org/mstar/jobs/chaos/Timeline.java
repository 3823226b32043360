package org.mstar.jobs.chaos;

import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** What the run did to its target, and when: printed beside a violating request's history. */
final class Timeline {
    record Event(long atMillis, String what) {
        @Override
        public String toString() {
            return Instant.ofEpochMilli(atMillis) + " " + what;
        }
    }

    private final List<Event> events = new CopyOnWriteArrayList<>();

    void add(String what) {
        Event e = new Event(System.currentTimeMillis(), what);
        events.add(e);
        System.out.println("chaos: " + e);
    }

    List<Event> between(long fromMillis, long toMillis) {
        return events.stream().filter(e -> e.atMillis() >= fromMillis && e.atMillis() <= toMillis).toList();
    }
}
