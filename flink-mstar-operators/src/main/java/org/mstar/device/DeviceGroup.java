package org.mstar.device;

import java.lang.reflect.InvocationTargetException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.IntConsumer;
import org.mstar.device.cpu.CpuDevice;

/**
 * The devices one engine computes over (tensor or expert parallelism): rank r is {@code device(r)}, driven by a
 * thread of its own so that the ranks' shards of a step run at once, and the ranks sum partial results through
 * {@link #allReduce()}. N CPU devices are N independent compute-op instances; on CUDA the GPUs of one host, summed
 * by peer copies. The group owns its devices.
 */
public final class DeviceGroup implements AutoCloseable {
    private static final String CUDA_ALL_REDUCE = "org.mstar.device.cuda.CudaPeerAllReduce";

    private final List<Device> devices;
    private final List<ExecutorService> threads = new ArrayList<>();
    private final AllReduce allReduce;

    private DeviceGroup(List<Device> devices, AllReduce allReduce) {
        this.devices = List.copyOf(devices);
        this.allReduce = allReduce;
        for (int r = 0; r < devices.size(); r++) {
            String name = "mstar-rank-" + r;
            threads.add(Executors.newSingleThreadExecutor(run -> {
                Thread t = new Thread(run, name);
                t.setDaemon(true);
                return t;
            }));
        }
    }

    /**
     * {@code degree} devices named by {@code spec}: "cpu" gives that many CPU devices, each with its share of the
     * processors; "cuda:K" gives cuda:K .. cuda:K+degree-1; a list "cuda:0,cuda:2" names each (its length must be the
     * degree).
     *
     * @throws IllegalArgumentException for a degree below 1 or a list of another length
     */
    public static DeviceGroup open(String spec, int degree, KernelOptions options) {
        if (degree < 1) {
            throw new IllegalArgumentException("tensor parallel degree must be >= 1, got " + degree);
        }
        List<String> names = names(spec.trim(), degree);
        if (names.get(0).equalsIgnoreCase("cpu")) {
            int threadsEach = Math.max(1, Runtime.getRuntime().availableProcessors() / degree);
            List<Device> cpus = new ArrayList<>();
            for (int r = 0; r < degree; r++) {
                cpus.add(new CpuDevice(threadsEach));
            }
            return new DeviceGroup(cpus, new HostAllReduce(degree));
        }
        List<Device> opened = new ArrayList<>();
        try {
            for (String n : names) {
                opened.add(Devices.open(n, options));
            }
            return new DeviceGroup(opened, degree == 1 ? new HostAllReduce(1) : cudaAllReduce(opened));
        } catch (RuntimeException e) {
            opened.forEach(Device::close);
            throw e;
        }
    }

    /** A group of the given devices, which it owns from now on, summed through the host. */
    public static DeviceGroup ofHostSummed(List<Device> devices) {
        return new DeviceGroup(devices, new HostAllReduce(devices.size()));
    }

    private static List<String> names(String spec, int degree) {
        if (spec.contains(",")) {
            List<String> names = List.of(spec.split("\\s*,\\s*"));
            if (names.size() != degree) {
                throw new IllegalArgumentException("device list '" + spec + "' names " + names.size()
                        + " devices for a tensor parallel degree of " + degree);
            }
            return names;
        }
        if (spec.equalsIgnoreCase("cpu")) {
            return List.of("cpu");
        }
        String n = spec.toLowerCase(Locale.ROOT);
        int first = n.equals("cuda") ? 0 : n.startsWith("cuda:") ? parseIndex(spec, n.substring(5)) : -1;
        if (first < 0) {
            throw new IllegalArgumentException("unknown device '" + spec + "': expected cpu, cuda:N or a list");
        }
        List<String> names = new ArrayList<>();
        for (int r = 0; r < degree; r++) {
            names.add("cuda:" + (first + r));
        }
        return names;
    }

    private static int parseIndex(String spec, String digits) {
        try {
            return Integer.parseInt(digits);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("unknown device '" + spec + "': expected cuda:N", e);
        }
    }

    private static AllReduce cudaAllReduce(List<Device> devices) {
        try {
            return (AllReduce) Class.forName(CUDA_ALL_REDUCE).getConstructor(List.class).newInstance(devices);
        } catch (InvocationTargetException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new DeviceUnavailableException("this build has no CUDA all-reduce (" + CUDA_ALL_REDUCE + ")", e);
        }
    }

    public int size() {
        return devices.size();
    }

    public Device device(int rank) {
        return devices.get(rank);
    }

    public List<Device> devices() {
        return devices;
    }

    public AllReduce allReduce() {
        return allReduce;
    }

    /**
     * Runs {@code work(r)} for every rank at once, each on its device's thread, and returns when all are done. When a
     * rank fails, the others are released from their reductions and the first failure is thrown here.
     */
    public void parallel(IntConsumer work) {
        List<Future<?>> done = new ArrayList<>();
        for (int r = 0; r < devices.size(); r++) {
            int rank = r;
            done.add(threads.get(r).submit(() -> {
                devices.get(rank).bindToCurrentThread();
                try {
                    work.accept(rank);
                } catch (RuntimeException | Error e) {
                    allReduce.abort();
                    throw e;
                }
            }));
        }
        RuntimeException failure = null;
        for (Future<?> f : done) {
            RuntimeException e = outcome(f);
            // the rank that failed first says why; the others only say they were released
            if (e != null && (failure == null || abandoned(failure) && !abandoned(e))) {
                failure = e;
            }
        }
        if (failure != null) {
            allReduce.rearm();
            throw failure;
        }
    }

    private static RuntimeException outcome(Future<?> f) {
        try {
            f.get();
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new IllegalStateException("interrupted waiting for the ranks", e);
        } catch (ExecutionException e) {
            return e.getCause() instanceof RuntimeException re ? re : new IllegalStateException(e.getCause());
        }
    }

    private static boolean abandoned(RuntimeException e) {
        return e.getMessage() != null && e.getMessage().startsWith("all-reduce abandoned");
    }

    @Override
    public void close() {
        threads.forEach(ExecutorService::shutdownNow);
        devices.forEach(Device::close);
    }
}
