package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

/** The demo's command line: --help, and one-line messages with an exit code for bad input. */
class AmpDemoCliTest {

    /** What one execution printed and returned. */
    private static final class Result {
        int code;
        String out;
        String err;
        String stdout;
    }

    private static Result execute(String... args) {
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        CommandLine cmd =
                AmpDemo.commandLine(
                        new AmpDemo(new PrintStream(stdout, true, StandardCharsets.UTF_8)));
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        cmd.setOut(new PrintWriter(out));
        cmd.setErr(new PrintWriter(err));
        Result result = new Result();
        result.code = cmd.execute(args);
        result.out = out.toString();
        result.err = err.toString();
        result.stdout = stdout.toString(StandardCharsets.UTF_8);
        return result;
    }

    @Test
    void helpExplainsEveryOptionAndEveryValue() {
        Result help = execute("--help");
        assertEquals(0, help.code);
        CommandLine cmd = AmpDemo.commandLine(new AmpDemo());
        for (OptionSpec option : cmd.getCommandSpec().options()) {
            assertTrue(help.out.contains(option.longestName()), option.longestName());
            assertTrue(option.description().length > 0, option.longestName() + " has a text");
        }
        for (DemoPrecision p : DemoPrecision.values()) {
            assertTrue(help.out.contains(p.cliName()), p.cliName());
        }
        for (DemoModel m : DemoModel.values()) {
            assertTrue(help.out.contains(m.cliName()), m.cliName());
        }
        for (DemoDataset d : DemoDataset.values()) {
            assertTrue(help.out.contains(d.cliName()), d.cliName());
        }
        assertTrue(help.out.contains("default: compare"), help.out);
        assertTrue(help.out.contains("default: resnet20"), help.out);
        assertTrue(help.out.contains("default: amp-output"), help.out);
        assertEquals("", help.err);
    }

    private static void assertOneLineError(Result result, int code, String... mentions) {
        assertEquals(code, result.code, result.err);
        String err = result.err.strip();
        assertFalse(err.isEmpty(), "an error message");
        assertEquals(1, err.lines().count(), "one line, no usage dump or stack trace: " + err);
        assertFalse(err.contains("Exception"), err);
        for (String mention : mentions) {
            assertTrue(err.contains(mention), "'" + mention + "' in: " + err);
        }
    }

    @Test
    void anUnknownPrecisionNamesTheValidOnes() {
        assertOneLineError(
                execute("--precision", "fp8"),
                2,
                "--precision",
                "fp8",
                "fp32, fp16, bf16, auto, compare");
    }

    @Test
    void anUnknownModelNamesTheValidOnes() {
        assertOneLineError(
                execute("--model", "resnet7"),
                2,
                "--model",
                "resnet7",
                "resnet20, resnet18, resnet50");
    }

    @Test
    void anUnknownDatasetNamesTheValidOnes() {
        assertOneLineError(
                execute("--dataset", "mnist"),
                2,
                "mnist",
                "fashion-mnist-subset, fashion-mnist, cifar10");
    }

    @Test
    void badNumbersAndUnknownOptionsAreOneLine() {
        assertOneLineError(execute("--epochs", "zero"), 2, "--epochs", "zero");
        assertOneLineError(execute("--epochs", "0"), 2, "--epochs must be 1 or more");
        assertOneLineError(execute("--batch-size", "-3"), 2, "--batch-size");
        assertOneLineError(execute("--image-size", "4"), 2, "--image-size", "between 8 and 1024");
        assertOneLineError(execute("--bogus"), 2, "--bogus");
        assertOneLineError(
                execute("--dataset", "cifar10", "--data-dir", "x"), 2, "--data-dir", "cifar10");
    }

    @Test
    void aMissingDataFolderIsAOneLineFailure(@TempDir Path tmp) {
        Path missing = tmp.resolve("no-such-folder");
        Result result = execute("--data-dir", missing.toString(), "--out", tmp.toString());
        assertOneLineError(result, 1, "no-such-folder");
    }

    @Test
    void cifar10OfflineSaysItNeedsTheNetwork(@TempDir Path tmp) {
        Result result = execute("--dataset", "cifar10", "--out", tmp.toString());
        assertOneLineError(result, 1, "offline", "CIFAR-10");
    }
}
