package io.github.djlamp.amp.distributed;

import com.sun.jna.ptr.IntByReference;

/**
 * This process's place in an MPI job, as {@link MpiBootstrap} joined it: the bound library, Open
 * MPI's predefined handles, this process's rank and the number of ranks.
 */
record MpiConnection(MpiLibrary mpi, OpenMpiHandles handles, int rank, int size) {

    /** The exit code of a job aborted by the watchdog. */
    static final int ABORT_CODE = 75;

    boolean isRoot() {
        return rank == 0;
    }

    /** Throws when an MPI call did not return {@code MPI_SUCCESS}. */
    static void check(int code, String function) {
        if (code != 0) {
            throw new IllegalStateException(function + " failed with MPI error code " + code);
        }
    }

    /** Ends the whole job: prints the message and aborts every rank through the launcher. */
    void abort(String message) {
        halt(this, message);
    }

    /** Prints the message, aborts the job when there is one, and ends this process. */
    static void halt(MpiConnection connection, String message) {
        // straight to stderr: the launcher collects it, and the process ends right after
        System.err.println(message);
        System.err.flush();
        if (connection != null) {
            connection.mpi.MPI_Abort(connection.handles.commWorld, ABORT_CODE);
        }
        Runtime.getRuntime().halt(ABORT_CODE);
    }

    /** Finalizes MPI unless something already did: afterwards it cannot start again. */
    void finalizeMpi() {
        IntByReference flag = new IntByReference();
        mpi.MPI_Finalized(flag);
        if (flag.getValue() == 0) {
            mpi.MPI_Finalize();
        }
    }
}
