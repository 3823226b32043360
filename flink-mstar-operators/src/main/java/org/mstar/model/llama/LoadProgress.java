package org.mstar.model.llama;

/** Told after each tensor of a model is loaded, so that a long load can show how far it is. */
@FunctionalInterface
public interface LoadProgress {
    /** Nothing to tell. */
    LoadProgress NONE = (loaded, total) -> { };

    /**
     * @param loadedBytes bytes of weights in place so far (in the dtype they are loaded as)
     * @param totalBytes bytes of all the model's weights
     */
    void loaded(long loadedBytes, long totalBytes);
}
