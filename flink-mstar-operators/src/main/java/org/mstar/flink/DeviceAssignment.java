package org.mstar.flink;

import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;

/** Resolves {@link GenerateOptions#DEVICE} to the concrete device of one subtask. */
final class DeviceAssignment {
    private static final Pattern CUDA = Pattern.compile("cuda:\\d+");

    private DeviceAssignment() {}

    /**
     * @return the setting, normalised
     * @throws IllegalArgumentException unless it is cpu, cuda:N or auto
     */
    static String validate(String setting) {
        String value = setting.trim().toLowerCase(Locale.ROOT);
        if (value.equals("cpu") || value.equals("auto") || CUDA.matcher(value).matches()) {
            return value;
        }
        throw new IllegalArgumentException("'" + GenerateOptions.DEVICE.key() + "' = " + setting
                + ": expected cpu, cuda:N or auto");
    }

    /**
     * @param setting {@code cpu}, {@code cuda:N} or {@code auto}
     * @param gpus the TaskManager's GPUs from Flink's external-resource info (each with an {@code index}
     *     property, as Flink's GPU plugin reports them)
     * @param subtaskIndex spreads the subtasks of a TaskManager with several GPUs and slots over its GPUs
     * @return {@code cpu} or {@code cuda:N}
     */
    static String resolve(String setting, Collection<ExternalResourceInfo> gpus, int subtaskIndex) {
        String value = validate(setting);
        if (!value.equals("auto")) {
            return value;
        }
        List<String> indexes = gpus.stream()
                .map(gpu -> gpu.getProperty("index").orElse(null))
                .filter(i -> i != null && i.matches("\\d+"))
                .sorted(Comparator.comparingInt(Integer::parseInt))
                .toList();
        return indexes.isEmpty() ? "cpu" : "cuda:" + indexes.get(subtaskIndex % indexes.size());
    }
}
