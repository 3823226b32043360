package org.mstar.resources;

/**
 * FIFO retention for a stream that keeps committing: once the committed tokens behind
 * {@code protectedPrefix} exceed {@code contextBudget}, the oldest unprotected whole pages are released.
 */
public record RetentionPolicy(int contextBudget, int protectedPrefix) {
    public RetentionPolicy {
        if (contextBudget <= 0) throw new IllegalArgumentException("context_budget must be > 0, got " + contextBudget);
        if (protectedPrefix < 0) throw new IllegalArgumentException("protected_prefix must be >= 0, got " + protectedPrefix);
    }

    public RetentionPolicy(int contextBudget) {
        this(contextBudget, 0);
    }
}
