package io.github.djlamp.amp.distributed;

import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

/**
 * Open MPI's predefined handles: in its ABI, {@code MPI_COMM_WORLD}, {@code MPI_FLOAT}, {@code
 * MPI_SUM}, ... are the addresses of global objects in {@code libmpi.so}, and {@code MPI_IN_PLACE}
 * is the address 1.
 */
final class OpenMpiHandles {

    static final Pointer IN_PLACE = Pointer.createConstant(1);
    static final Pointer STATUS_IGNORE = Pointer.NULL;

    final Pointer commWorld;
    final Pointer floatType;
    final Pointer longType;
    final Pointer byteType;
    final Pointer sum;
    final Pointer max;

    OpenMpiHandles(NativeLibrary library) {
        try {
            commWorld = library.getGlobalVariableAddress("ompi_mpi_comm_world");
        } catch (UnsatisfiedLinkError e) {
            throw new IllegalStateException(
                    "The libmpi found ("
                            + library.getFile()
                            + ") is not Open MPI: djl-amp's MPI binding uses Open MPI's ABI"
                            + " (4.x or 5.x). Load Open MPI (module load openmpi, or apt-get"
                            + " install openmpi-bin libopenmpi-dev) or point -Djna.library.path at"
                            + " its lib directory",
                    e);
        }
        floatType = library.getGlobalVariableAddress("ompi_mpi_float");
        longType = library.getGlobalVariableAddress("ompi_mpi_long");
        byteType = library.getGlobalVariableAddress("ompi_mpi_byte");
        sum = library.getGlobalVariableAddress("ompi_mpi_op_sum");
        max = library.getGlobalVariableAddress("ompi_mpi_op_max");
    }
}
