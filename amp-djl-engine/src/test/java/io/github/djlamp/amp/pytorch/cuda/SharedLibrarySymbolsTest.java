package io.github.djlamp.amp.pytorch.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.LibUtils;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The dynamic symbols of libtorch's own libraries, read from their ELF files. */
class SharedLibrarySymbolsTest {

    private static Path libtorch(String name) {
        Engine.getEngine("PyTorch");
        return Path.of(LibUtils.getLibtorchPath()).resolve(System.mapLibraryName(name));
    }

    @Test
    void libtorchDefinesTheEntryPointsDjlAmpAlreadyCalls() throws IOException {
        Set<String> symbols = SharedLibrarySymbols.definedIn(libtorch("torch_cpu"));
        // called through JNA by LibtorchOneDnn and LibtorchAutocast: if they were not defined,
        // those bindings would have failed long before this test
        assertTrue(symbols.contains("_ZN2at13globalContextEv"));
        assertTrue(symbols.contains("_ZN2at7Context20setUserEnabledMkldnnEb"));
        assertTrue(symbols.contains("_ZNK2at7Context17userEnabledMkldnnEv"));
        assertTrue(symbols.size() > 10_000, symbols.size() + " symbols");
    }

    /** binutils' nm is the reference where the machine has it. */
    @Test
    void theSameNamesAsNmLists() throws IOException, InterruptedException {
        Path library = libtorch("c10");
        Set<String> ours = SharedLibrarySymbols.definedIn(library);
        Process nm;
        try {
            nm = new ProcessBuilder("nm", "-D", "--defined-only", library.toString()).start();
        } catch (IOException e) {
            System.out.println(
                    "SharedLibrarySymbolsTest: no nm on this machine, compared with libtorch's"
                            + " known entry points only: "
                            + e.getMessage());
            return;
        }
        Set<String> listed = new TreeSet<>();
        try (InputStream out = nm.getInputStream()) {
            for (String line : new String(out.readAllBytes()).split("\n")) {
                String[] fields = line.trim().split(" ");
                listed.add(fields[fields.length - 1].replaceAll("@.*", ""));
            }
        }
        assertTrue(nm.waitFor(60, TimeUnit.SECONDS));
        assertEquals(listed, ours);
    }

    @Test
    void aFileThatIsNotALibraryIsRefusedWithItsName(@TempDir Path dir) throws IOException {
        Path text = dir.resolve("notes.txt");
        Files.writeString(
                text, "not an ELF file, but long enough to hold an ELF header's 64 bytes");
        IOException refused =
                assertThrows(IOException.class, () -> SharedLibrarySymbols.definedIn(text));
        assertTrue(
                refused.getMessage().contains("notes.txt is not a 64-bit"), refused.getMessage());
    }

    @Test
    void aLibraryCutShortIsRefused(@TempDir Path dir) throws IOException {
        byte[] whole = Files.readAllBytes(libtorch("c10"));
        Path cut = dir.resolve("libcut.so");
        Files.write(cut, java.util.Arrays.copyOf(whole, 4096));
        IOException refused =
                assertThrows(IOException.class, () -> SharedLibrarySymbols.definedIn(cut));
        assertTrue(refused.getMessage().contains("cut short"), refused.getMessage());
    }
}
