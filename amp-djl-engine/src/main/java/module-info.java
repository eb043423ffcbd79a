/**
 * djl-amp's engine layer for DJL's PyTorch engine: the {@code AmpBackend} that {@code
 * io.github.djlamp.amp} finds through {@link java.util.ServiceLoader}.
 *
 * <p>Only {@code PtAmpBackend} is public; a program needs it only to read its host-read count.
 */
// DJL's engine jar and JNA's are automatic modules with a declared Automatic-Module-Name.
@SuppressWarnings("requires-automatic")
module io.github.djlamp.amp.pytorch {
    requires transitive io.github.djlamp.amp;
    requires ai.djl.pytorch_engine;
    requires com.sun.jna;
    requires org.slf4j;

    exports io.github.djlamp.amp.pytorch;

    provides io.github.djlamp.amp.spi.AmpBackend with
            io.github.djlamp.amp.pytorch.PtAmpBackend;
}
