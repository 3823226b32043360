package org.mstar.resources;

/**
 * A client's mistake in a request (400-class): a value out of range, or a capability the node lacks.
 * The message names the offending field. Distinct from {@link ModelFaultException}, which is the
 * model's fault (500-class).
 */
public class RequestValidationException extends IllegalArgumentException {
    private final String field;

    public RequestValidationException(String field, String message) {
        super(field + ": " + message);
        this.field = field;
    }

    /** The request field at fault. */
    public String field() {
        return field;
    }
}
