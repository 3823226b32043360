package org.mstar.flink;

import java.nio.file.Path;
import java.util.Locale;
import java.util.function.Function;
import org.mstar.model.llama.LoadProgress;
import org.mstar.model.llama.LoadProgressLines;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A model's weights loaded inside a task, told at INFO: a line when the load starts, one per tenth of a large model
 * ({@link LoadProgressLines}) and one when it is done. The load runs while the task initialises, where nothing else
 * tells the user what a long start is waiting for; the command line's log configuration shows these lines.
 */
final class WeightLoading {
    private static final Logger LOG = LoggerFactory.getLogger(WeightLoading.class);

    private WeightLoading() {}

    /** Runs {@code load} with a progress that logs, between a starting and a finishing line. */
    static <T> T logged(Path modelDir, String device, Function<LoadProgress, T> load) {
        LOG.info("Loading the weights of {} on {}", modelDir, device);
        long start = System.nanoTime();
        T loaded = load.apply(new LoadProgressLines(LOG::info));
        LOG.info("Loaded the weights of {} on {} in {} s", modelDir, device,
                String.format(Locale.ROOT, "%.1f", (System.nanoTime() - start) / 1e9));
        return loaded;
    }
}
