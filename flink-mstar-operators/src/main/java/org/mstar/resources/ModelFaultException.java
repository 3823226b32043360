package org.mstar.resources;

/**
 * The model (or its declaration) is at fault, not the client: a 500-class error, for example a
 * per-request layout naming a KV label the model never declared.
 */
public class ModelFaultException extends RuntimeException {
    public ModelFaultException(String message) {
        super(message);
    }
}
