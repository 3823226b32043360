package org.mstar.device.cuda.harness;

import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/**
 * The harnesses' command lines, through picocli: {@code --help} prints every option with its one-line description
 * and exits 0; an unknown option, a missing or malformed value, or a combination the options refuse prints one line
 * and exits 2, before anything touches the GPU.
 */
final class HarnessCommandLine {
    /** Wide enough that each option's description stays on its option's line. */
    private static final int USAGE_WIDTH = 160;
    private static final int LONG_OPTIONS_WIDTH = 40;

    /**
     * A harness's options, which may also declare options no annotation can, and refuse combinations that no single
     * option's annotation can.
     */
    interface Options {
        /** Adds to {@code spec}, which holds the annotated options, those that are made in code; none by default. */
        default void addOptions(CommandSpec spec) {
        }

        /** Throws {@link ParameterException} on {@code line} naming a combination it refuses. */
        void check(CommandLine line);
    }

    private HarnessCommandLine() {}

    /** Sets {@code options} from {@code args} and checks them; the line returned says whether --help was asked. */
    static CommandLine parse(Options options, String... args) {
        CommandLine line = new CommandLine(options).setUsageHelpWidth(USAGE_WIDTH)
                .setUsageHelpLongOptionsMaxWidth(LONG_OPTIONS_WIDTH);
        options.addOptions(line.getCommandSpec());
        line.parseArgs(args);
        if (!line.isUsageHelpRequested()) {
            options.check(line);
        }
        return line;
    }

    /** {@link #parse} for a main: prints the usage and exits on --help, prints one line and exits 2 when refused. */
    static <T extends Options> T parseOrExit(T options, String[] args) {
        try {
            CommandLine line = parse(options, args);
            if (line.isUsageHelpRequested()) {
                line.usage(System.out);
                System.exit(0);
            }
        } catch (ParameterException e) {
            System.err.println(e.getCommandLine().getCommandName() + ": " + e.getMessage() + " (--help lists the options)");
            System.exit(2);
        }
        return options;
    }
}
