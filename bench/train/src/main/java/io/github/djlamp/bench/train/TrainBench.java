package io.github.djlamp.bench.train;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The training benchmarks' command line; {@code bench/train/run.sh} calls its subcommands.
 *
 * <pre>
 * TrainBench throughput --network resnet18 --batch 64 --out t.json   # alternating variants, one JVM
 * TrainBench memory --network resnet18 --out m.json                  # one child JVM per measurement
 * TrainBench verification --network resnet50 --batch 8 --out v.json  # kernel checks: first step
 * TrainBench report --dir bench-train/target/results --results bench/RESULTS.md ...
 * </pre>
 */
@Command(
        name = "train-bench",
        mixinStandardHelpOptions = true,
        description =
                "djl-amp training benchmarks: throughput, step memory, bookkeeping overhead,"
                        + " kernel verification.",
        subcommands = {
            ThroughputCommand.class,
            HostProfileCommand.class,
            MemoryCommand.class,
            MemoryProbeCommand.class,
            BookkeepingCommand.class,
            CaptureOverheadCommand.class,
            VerificationCommand.class,
            VerificationProbeCommand.class,
            ReportCommand.class
        })
public final class TrainBench implements Runnable {

    /** Picocli creates the command. */
    public TrainBench() {}

    /**
     * Runs a subcommand.
     *
     * @param args the subcommand and its options; {@code --help} lists them
     */
    public static void main(String[] args) {
        System.exit(new CommandLine(new TrainBench()).execute(args));
    }

    /** Without a subcommand: prints the usage. */
    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }
}
