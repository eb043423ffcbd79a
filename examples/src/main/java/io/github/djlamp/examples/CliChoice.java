package io.github.djlamp.examples;

import java.util.Arrays;
import java.util.function.Function;
import java.util.stream.Collectors;
import picocli.CommandLine;

/**
 * Reads one of a fixed set of command-line names (such as {@code fashion-mnist-subset}) into the
 * enum constant it names; a wrong name gets a message listing the valid ones.
 *
 * @param <E> the enum
 */
public final class CliChoice<E extends Enum<E>> implements CommandLine.ITypeConverter<E> {

    private final E[] values;
    private final Function<E, String> cliName;

    /**
     * Creates a converter.
     *
     * @param values the constants, in the order to list them
     * @param cliName the command-line name of a constant
     */
    public CliChoice(E[] values, Function<E, String> cliName) {
        this.values = values.clone();
        this.cliName = cliName;
    }

    /**
     * Returns the valid names, comma separated.
     *
     * @return e.g. {@code resnet20, resnet18, resnet50}
     */
    public String validNames() {
        return Arrays.stream(values).map(cliName).collect(Collectors.joining(", "));
    }

    /** {@inheritDoc} */
    @Override
    public E convert(String value) {
        for (E e : values) {
            if (cliName.apply(e).equals(value)) {
                return e;
            }
        }
        throw new CommandLine.TypeConversionException(
                "'" + value + "' is not one of " + validNames());
    }
}
