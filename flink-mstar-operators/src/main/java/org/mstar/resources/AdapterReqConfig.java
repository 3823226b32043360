package org.mstar.resources;

import java.util.List;

/** The adapter one request runs with, by name. */
public record AdapterReqConfig(String adapter) implements ResourceReqConfig {
    /** Names listed in the message of an unknown adapter, at most. */
    private static final int LISTED = 20;

    /** @throws RequestValidationException when {@code spec}'s library has no adapter of that name */
    @Override
    public void validate(NodeResourceSpec spec) {
        if (!(spec instanceof AdapterSpec s)) {
            throw new RequestValidationException("adapter", "this model serves no adapters, asked for '" + adapter
                    + "'");
        }
        if (!s.library().contains(adapter)) {
            List<String> names = s.library().names();
            String known = names.size() <= LISTED ? String.join(", ", names)
                    : String.join(", ", names.subList(0, LISTED)) + " and " + (names.size() - LISTED) + " more";
            throw new RequestValidationException("adapter", "unknown adapter '" + adapter + "'; this engine serves "
                    + (names.isEmpty() ? "none" : known));
        }
    }
}
