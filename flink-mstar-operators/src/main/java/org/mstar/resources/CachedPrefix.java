package org.mstar.resources;

/** How many leading tokens of a walk's inputs a resource already holds (prefix cache). */
public record CachedPrefix(int tokens) {
    public CachedPrefix {
        if (tokens < 0) {
            throw new IllegalArgumentException("tokens must be >= 0, got " + tokens);
        }
    }
}
