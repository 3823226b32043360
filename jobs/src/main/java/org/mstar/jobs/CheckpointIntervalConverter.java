package org.mstar.jobs;

import java.time.Duration;
import org.apache.flink.util.TimeUtils;
import picocli.CommandLine;

/**
 * {@code serve --checkpoint-interval}: a bare number is seconds (as the flag always took), anything else a duration
 * as Flink writes them ({@code 250ms}, {@code 1.5 s}, {@code 1min}); Flink refuses intervals under 10 ms.
 */
final class CheckpointIntervalConverter implements CommandLine.ITypeConverter<Duration> {
    private static final Duration MIN = Duration.ofMillis(10);

    @Override
    public Duration convert(String value) {
        Duration interval;
        try {
            interval = value.strip().matches("\\d+") ? Duration.ofSeconds(Long.parseLong(value.strip()))
                    : TimeUtils.parseDuration(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException("'" + value + "' is neither seconds nor a duration such as"
                    + " 250ms or 2s");
        }
        if (interval.compareTo(MIN) < 0) {
            throw new CommandLine.TypeConversionException("'" + value + "' is under Flink's least interval, 10ms");
        }
        return interval;
    }
}
