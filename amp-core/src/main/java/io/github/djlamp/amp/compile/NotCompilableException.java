package io.github.djlamp.amp.compile;

import io.github.djlamp.amp.exception.AmpException;

/** A block the compiled forward has no form for: the block's path and why. */
public final class NotCompilableException extends AmpException {

    private static final long serialVersionUID = 1L;

    private final String blockPath;
    private final String reason;

    NotCompilableException(String blockPath, String reason) {
        super((blockPath.isEmpty() ? "root" : blockPath) + ": " + reason);
        this.blockPath = blockPath;
        this.reason = reason;
    }

    /**
     * Returns the path of the block, from the root, with its children's names ({@code ""} for the
     * root).
     *
     * @return the path
     */
    public String getBlockPath() {
        return blockPath;
    }

    /**
     * Returns why the block cannot be compiled.
     *
     * @return the reason
     */
    public String getReason() {
        return reason;
    }
}
