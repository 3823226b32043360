package org.mstar.model;

/**
 * A model file (config.json, a safetensors file or index, tokenizer.json) is malformed, inconsistent or
 * asks for something this library does not support. The message names the file and the key or tensor.
 */
public class ModelFormatException extends RuntimeException {
    public ModelFormatException(String message) {
        super(message);
    }

    public ModelFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
