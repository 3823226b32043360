package org.mstar.device.cuda.harness;

import java.util.List;
import java.util.Locale;

/**
 * One comparison of a CUDA op with its reference.
 *
 * @param error norm-wise relative error ‖gpu − ref‖ / ‖ref‖ for float outputs, mismatching elements for
 *              integer outputs (NaN or an unwritten element makes it infinite)
 * @param reference "cpu" (CpuDevice), or "gpu …" for checks of the GPU against itself (graph replay,
 *                  batch invariance)
 * @param millis median device time of the op over five runs after the checked one
 */
record CheckResult(String op, String shape, String dtype, double error, double tolerance, double millis,
                   String reference) {

    /**
     * Runs one check; an exception, or a class missing from the bundle, becomes a failed row that carries its
     * message instead of ending the run. Its failed rows are printed at once, so a run cut by a time limit before
     * its table still shows them.
     */
    static void attempt(List<CheckResult> results, String name, Runnable check) {
        System.out.println("check " + name); // progress, so a hang or crash shows where it happened
        int before = results.size();
        try {
            check.run();
        } catch (RuntimeException | LinkageError e) {
            results.add(new CheckResult(name, "-", "-", Double.POSITIVE_INFINITY, 0, 0,
                    "threw " + e.getClass().getSimpleName() + ": " + e.getMessage()));
        }
        List<CheckResult> added = results.subList(before, results.size());
        long failed = added.stream().filter(r -> !r.passed()).count();
        System.out.println("  " + (added.size() - failed) + " of " + added.size() + " passed");
        for (CheckResult r : added) {
            if (!r.passed()) {
                System.out.print(row(r));
            }
        }
    }

    boolean passed() {
        return error <= tolerance;
    }

    static String table(List<CheckResult> results) {
        StringBuilder sb = new StringBuilder();
        sb.append("| op | shape | dtype | error | tolerance | pass | GPU ms | reference |\n");
        sb.append("|---|---|---|---|---|---|---|---|\n");
        for (CheckResult r : results) {
            sb.append(row(r));
        }
        return sb.toString();
    }

    private static String row(CheckResult r) {
        return String.format(Locale.ROOT, "| %s | %s | %s | %.3e | %.0e | %s | %.4f | %s |%n", r.op, r.shape,
                r.dtype, r.error, r.tolerance, r.passed() ? "PASS" : "FAIL", r.millis, r.reference);
    }
}
