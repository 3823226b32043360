package org.mstar.jobs;

import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.Filter;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.filter.AbstractFilter;

/**
 * Drops the log lines (and their stack traces) of a task failure that stopped the job at start-up, a model or
 * device that cannot be loaded: the command says it in one line when the job ends (see {@link Mstar}). Every other
 * warning still shows.
 */
final class StartUpFailureLogFilter extends AbstractFilter {
    private StartUpFailureLogFilter() {
        super(Filter.Result.DENY, Filter.Result.NEUTRAL);
    }

    /** Adds the filter to the command line's logging, when log4j is the logging backend. */
    static void install() {
        if (LogManager.getContext(false) instanceof LoggerContext context) {
            context.getConfiguration().getRootLogger().addFilter(new StartUpFailureLogFilter());
            context.updateLoggers();
        }
    }

    @Override
    public Filter.Result filter(LogEvent event) {
        for (Throwable t = event.getThrown(); t != null; t = t.getCause()) {
            if (t instanceof SuppressRestartsException) {
                return onMatch;
            }
        }
        return onMismatch;
    }
}
