package org.mstar.jobs;

import picocli.CommandLine.Option;

/**
 * The engine-sizing flags of the benchmarks: batch rows, token budget and KV pages. A command mixes in either
 * {@link #fixed} sizes, shown as each flag's default, or none (each engine then sized from its device), and then
 * says so in its resource bundle under the flags' description keys.
 */
final class EngineSizeFlags {
    @Option(names = "--max-batch-rows", paramLabel = "N", descriptionKey = "max-batch-rows",
            description = "Default: ${DEFAULT-VALUE}.")
    Integer maxBatchRows;

    @Option(names = "--token-budget", paramLabel = "N", descriptionKey = "token-budget",
            description = "Default: ${DEFAULT-VALUE}.")
    Integer tokenBudget;

    @Option(names = "--pages", paramLabel = "N", descriptionKey = "pages",
            description = "KV pages of 16 tokens. Default: ${DEFAULT-VALUE}.")
    Integer pages;

    /** These sizes unless the flags say others. */
    static EngineSizeFlags fixed(int maxBatchRows, int tokenBudget, int pages) {
        EngineSizeFlags flags = new EngineSizeFlags();
        flags.maxBatchRows = maxBatchRows;
        flags.tokenBudget = tokenBudget;
        flags.pages = pages;
        return flags;
    }
}
