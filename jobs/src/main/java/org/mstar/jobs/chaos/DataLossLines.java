package org.mstar.jobs.chaos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** The lines of a run's log files that tell of lost data, for the summary. */
final class DataLossLines {
    private DataLossLines() {}

    /** Those lines of the {@code *.log} files in {@code folders}, each after its file's name. */
    static List<String> in(Path... folders) throws IOException {
        List<String> out = new ArrayList<>();
        for (Path folder : folders) {
            try (Stream<Path> logs = Files.list(folder)) {
                logs.filter(f -> f.getFileName().toString().endsWith(".log")).sorted().forEach(f -> {
                    try {
                        Files.readAllLines(f).stream().filter(l -> l.contains("data loss"))
                                .forEach(l -> out.add(f.getFileName() + ": " + l));
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
            }
        }
        return out;
    }
}
