package org.mstar.engine;

import java.nio.file.Path;

/**
 * Per-request LoRA adapters an engine serves: the PEFT adapters in {@code folder} (one subfolder per adapter, named
 * as requests name it), kept on the device in {@code slots} slots, each holding one adapter at a time; an adapter no
 * running request uses makes room for another, least recently used first ({@code docs/guides/lora.md}).
 */
public record AdapterOptions(Path folder, int slots) {
    /** Slots when none are set: on a GPU each costs about rank · (sum of the targets' widths) · layers · 2 bytes. */
    public static final int DEFAULT_SLOTS = 64;

    public AdapterOptions {
        if (folder == null) {
            throw new IllegalArgumentException("an adapters folder is required");
        }
        if (slots < 1) {
            throw new IllegalArgumentException("adapter slots must be >= 1, got " + slots);
        }
    }
}
