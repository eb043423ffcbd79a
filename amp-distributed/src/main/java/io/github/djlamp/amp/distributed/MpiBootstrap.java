package io.github.djlamp.amp.distributed;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import java.util.Map;

/**
 * Joins the job an MPI launcher started: recognizes the launcher by its environment, loads Open
 * MPI's {@code libmpi.so} through JNA, initializes MPI (once per process) and reads this process's
 * rank and the number of ranks.
 */
final class MpiBootstrap {

    private static final int MPI_THREAD_SERIALIZED = 2;
    private static final String[] LAUNCHER_VARIABLES = {
        "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "SLURM_PROCID"
    };

    private MpiBootstrap() {}

    /** Whether an MPI launcher ({@code mpirun}, {@code srun}) started the process. */
    static boolean launchedByMpi(Map<String, String> environment) {
        for (String variable : LAUNCHER_VARIABLES) {
            if (environment.containsKey(variable)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Initializes MPI and returns this process's connection to the job.
     *
     * @throws IllegalStateException when no usable Open MPI library is found, or MPI was
     *     initialized or finalized in this process already
     */
    static MpiConnection join() {
        NativeLibrary library;
        MpiLibrary mpi;
        try {
            library = NativeLibrary.getInstance("mpi");
            mpi = Native.load("mpi", MpiLibrary.class);
        } catch (UnsatisfiedLinkError e) {
            throw new IllegalStateException(
                    "This process was started by an MPI launcher but libmpi.so was not found:"
                            + " install Open MPI (apt-get install openmpi-bin libopenmpi-dev, or"
                            + " module load openmpi) or set -Djna.library.path to its lib"
                            + " directory",
                    e);
        }
        OpenMpiHandles handles = new OpenMpiHandles(library);
        IntByReference flag = new IntByReference();
        mpi.MPI_Finalized(flag);
        if (flag.getValue() != 0) {
            // initializing again would make Open MPI end the process
            throw new IllegalStateException(
                    "MPI was finalized when the World was closed and cannot start again in this"
                            + " process: keep one World open for the whole program");
        }
        mpi.MPI_Initialized(flag);
        if (flag.getValue() != 0) {
            // a second World would post its own watchdog receives beside the first one's
            throw new IllegalStateException(
                    "MPI is already initialized in this process: World.init() was called while"
                            + " the World of an earlier call is open. A process joins the job"
                            + " once: pass the World the first call returned (to"
                            + " DataParallel.configure, DistributedSampler, ...) and close it at"
                            + " the end");
        }
        IntByReference provided = new IntByReference();
        MpiConnection.check(
                mpi.MPI_Init_thread(Pointer.NULL, Pointer.NULL, MPI_THREAD_SERIALIZED, provided),
                "MPI_Init_thread");
        IntByReference value = new IntByReference();
        MpiConnection.check(mpi.MPI_Comm_rank(handles.commWorld, value), "MPI_Comm_rank");
        int rank = value.getValue();
        MpiConnection.check(mpi.MPI_Comm_size(handles.commWorld, value), "MPI_Comm_size");
        return new MpiConnection(mpi, handles, rank, value.getValue());
    }

    /** The library's name and version, as MPI reports it, up to the first comma. */
    static String libraryVersion(MpiLibrary mpi) {
        byte[] text = new byte[8192];
        IntByReference length = new IntByReference();
        if (mpi.MPI_Get_library_version(text, length) != 0) {
            return "MPI";
        }
        String version = new String(text, 0, length.getValue()).trim();
        int comma = version.indexOf(',');
        return comma > 0 ? version.substring(0, comma) : version;
    }
}
