package io.github.djlamp.amp.exception;

/**
 * Thrown when mixed precision cannot do what was asked; the message says what is wrong and what to
 * do instead.
 */
public class AmpException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /**
     * Creates an exception with a message that names the problem and the fix.
     *
     * @param message what is wrong and what to do instead
     */
    public AmpException(String message) {
        super(message);
    }

    /**
     * Creates an exception with a message and the failure behind it.
     *
     * @param message what is wrong and what to do instead
     * @param cause the underlying failure
     */
    public AmpException(String message, Throwable cause) {
        super(message, cause);
    }
}
