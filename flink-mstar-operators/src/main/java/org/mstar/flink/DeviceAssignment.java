package org.mstar.flink;

import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;

/** Resolves {@link GenerateOptions#DEVICE} to the concrete device of one subtask. */
@Internal
public final class DeviceAssignment {
    private static final Pattern DEVICE = Pattern.compile("cpu|cuda:\\d+");

    private DeviceAssignment() {}

    /**
     * @return the setting, normalised (lower case, no blanks)
     * @throws IllegalArgumentException unless it is auto, or cpu / cuda:N, or a comma-separated list of those
     */
    public static String validate(String setting) {
        String value = setting.replace(" ", "").toLowerCase(Locale.ROOT);
        if (value.equals("auto") || Arrays.stream(value.split(",", -1)).allMatch(d -> DEVICE.matcher(d).matches())) {
            return value;
        }
        throw new IllegalArgumentException("'" + GenerateOptions.DEVICE.key() + "' = " + setting
                + ": expected cpu, cuda:N, a list such as cuda:0,cuda:1, or auto");
    }

    /** GPUs a setting lists: its entries when every one is {@code cuda:N}; 0 for cpu, auto or a mixed list. */
    public static int listedGpus(String setting) {
        String value = validate(setting);
        String[] devices = value.split(",");
        return Arrays.stream(devices).allMatch(d -> d.startsWith("cuda:")) ? devices.length : 0;
    }

    /**
     * @param setting {@code cpu}, {@code cuda:N}, a list of those (subtask i takes entry i modulo its length) or
     *     {@code auto}
     * @param gpus the TaskManager's GPUs from Flink's external-resource info (each with an {@code index}
     *     property, as Flink's GPU plugin reports them)
     * @param subtaskIndex spreads the subtasks of a TaskManager with several GPUs and slots over its GPUs
     * @return {@code cpu} or {@code cuda:N}
     */
    public static String resolve(String setting, Collection<ExternalResourceInfo> gpus, int subtaskIndex) {
        String value = validate(setting);
        if (!value.equals("auto")) {
            String[] devices = value.split(",");
            return devices[subtaskIndex % devices.length];
        }
        List<String> indexes = gpus.stream()
                .map(gpu -> gpu.getProperty("index").orElse(null))
                .filter(i -> i != null && i.matches("\\d+"))
                .sorted(Comparator.comparingInt(Integer::parseInt))
                .toList();
        return indexes.isEmpty() ? "cpu" : "cuda:" + indexes.get(subtaskIndex % indexes.size());
    }
}
