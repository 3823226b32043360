package org.mstar.jobs;

import org.mstar.device.DeviceUnavailableException;
import org.mstar.model.ModelFormatException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code mstar} command line: {@code generate} and {@code transcribe} run an engine alone, {@code kafka} runs a
 * broker to try things with, {@code serve} runs the generation job, {@code send} talks to a running one,
 * {@code demo} runs everything in this process, {@code bench-delivery} measures how soon tokens reach a consumer, {@code bench-pipeline} compares the job with
 * the bare engine.
 */
@Command(name = "mstar", mixinStandardHelpOptions = true, versionProvider = MstarVersion.class,
        subcommands = {GenerateCommand.class, TranscribeCommand.class, KafkaCommand.class, ServeCommand.class,
                SendCommand.class, DemoCommand.class, FramesCommand.class, BenchDeliveryCommand.class,
                BenchPipelineCommand.class, BenchServingCommand.class, BenchHandoffCommand.class},
        description = "Serve LLMs inside Apache Flink, fed by Kafka.")
public final class Mstar implements Runnable {
    /** Quiet logging for the command line, unless Flink or the user configured log4j already. */
    private static final String CLI_LOG_CONFIG = "mstar-cli-log4j2.properties";

    public static void main(String[] args) {
        if (System.getProperty("log4j.configurationFile") == null
                && System.getProperty("log4j2.configurationFile") == null) {
            System.setProperty("log4j2.configurationFile", CLI_LOG_CONFIG);
            StartUpFailureLogFilter.install();
        }
        int code = commandLine().execute(args);
        // Exit only on failure: under `flink run` and in application mode, main must return normally.
        if (code != 0) {
            System.exit(code);
        }
    }

    /**
     * The command line, with what every command shares: an option error prints the message and the usage (picocli's
     * default); an {@link IllegalArgumentException} out of a command, which is how the commands reject a value
     * they cannot use, prints its message and where the options are listed; a model folder that cannot be read
     * ({@link ModelFormatException}) or a device that cannot be opened ({@link DeviceUnavailableException}), also
     * as the cause of another exception, prints its message in one line. Each exits 2, instead of a stack trace.
     */
    public static CommandLine commandLine() {
        CommandLine cli = new CommandLine(new Mstar());
        cli.setCaseInsensitiveEnumValuesAllowed(true); // help texts name enum values in lower case (bench-handoff)
        cli.setExecutionExceptionHandler((e, command, parsed) -> {
            String prefix = "mstar " + command.getCommandName() + ": ";
            if (e instanceof IllegalArgumentException) {
                command.getErr().println(prefix + e.getMessage());
                command.getErr().println("(mstar " + command.getCommandName() + " --help lists its options)");
                return command.getCommandSpec().exitCodeOnInvalidInput();
            }
            Throwable cause = startUpFailure(e);
            if (cause == null) {
                throw e;
            }
            command.getErr().println(prefix + cause.getMessage());
            return command.getCommandSpec().exitCodeOnInvalidInput();
        });
        return cli;
    }

    /** The model or device failure in {@code e}'s causes that explains it to a user, or null. */
    static Throwable startUpFailure(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ModelFormatException || t instanceof DeviceUnavailableException) {
                return t;
            }
        }
        return null;
    }

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }
}
