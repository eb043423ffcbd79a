package io.github.djlamp.amp.pytorch.cuda;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Set;
import java.util.TreeSet;

/**
 * The names a shared library defines for the dynamic linker, read from its ELF {@code .dynsym}
 * section: what {@code nm -D --defined-only} lists. libtorch's C++ entry points change their
 * mangled names between PyTorch versions (a parameter added to a constructor changes its symbol),
 * so a binding asks which of the names it knows this library has instead of guessing one. Only the
 * section headers and the two sections are read, not the whole file (libtorch_cpu is 400 MB).
 */
public final class SharedLibrarySymbols {

    private static final int SHT_DYNSYM = 11;
    private static final int SYMBOL_SIZE = 24;
    private static final int SECTION_HEADER_SIZE = 64;

    private SharedLibrarySymbols() {}

    /**
     * Reads the symbols {@code library} defines.
     *
     * @param library a 64-bit little-endian ELF shared library
     * @return the defined dynamic symbols' names, mangled as the linker sees them
     * @throws IOException when the file cannot be read, or is not such a library
     */
    public static Set<String> definedIn(Path library) throws IOException {
        try (FileChannel file = FileChannel.open(library, StandardOpenOption.READ)) {
            ByteBuffer header = read(file, 0, 64, library);
            if (header.getInt(0) != 0x464c457f || header.get(4) != 2 || header.get(5) != 1) {
                throw new IOException(library + " is not a 64-bit little-endian ELF file");
            }
            long sectionTable = header.getLong(0x28);
            int entrySize = Short.toUnsignedInt(header.getShort(0x3a));
            int count = Short.toUnsignedInt(header.getShort(0x3c));
            if (entrySize != SECTION_HEADER_SIZE || count == 0) {
                throw new IOException(library + " has no readable section table");
            }
            ByteBuffer sections = read(file, sectionTable, (long) entrySize * count, library);
            for (int i = 0; i < count; i++) {
                int at = i * entrySize;
                if (sections.getInt(at + 4) != SHT_DYNSYM) {
                    continue;
                }
                int strings = sections.getInt(at + 0x28);
                if (strings <= 0 || strings >= count) {
                    throw new IOException(library + ": .dynsym links no string table");
                }
                ByteBuffer names = section(file, sections, strings * entrySize, library);
                ByteBuffer symbols = section(file, sections, at, library);
                return names(symbols, names, library);
            }
            throw new IOException(library + " has no dynamic symbol table");
        }
    }

    private static Set<String> names(ByteBuffer symbols, ByteBuffer names, Path library)
            throws IOException {
        Set<String> defined = new TreeSet<>();
        for (int at = 0; at + SYMBOL_SIZE <= symbols.limit(); at += SYMBOL_SIZE) {
            int name = symbols.getInt(at);
            boolean undefined = symbols.getShort(at + 6) == 0;
            if (name == 0 || undefined) {
                continue;
            }
            if (name < 0 || name >= names.limit()) {
                throw new IOException(library + ": a symbol's name lies outside .dynstr");
            }
            int end = name;
            while (end < names.limit() && names.get(end) != 0) {
                end++;
            }
            byte[] bytes = new byte[end - name];
            names.get(name, bytes);
            defined.add(new String(bytes, StandardCharsets.ISO_8859_1));
        }
        return defined;
    }

    /** The contents of the section whose header starts at {@code header} in the table. */
    private static ByteBuffer section(
            FileChannel file, ByteBuffer sections, int header, Path library) throws IOException {
        return read(
                file, sections.getLong(header + 0x18), sections.getLong(header + 0x20), library);
    }

    private static ByteBuffer read(FileChannel file, long offset, long length, Path library)
            throws IOException {
        if (offset < 0
                || length < 0
                || length > Integer.MAX_VALUE
                || offset + length > file.size()) {
            throw new IOException(library + " is cut short: a section lies past its end");
        }
        ByteBuffer buffer = ByteBuffer.allocate((int) length).order(ByteOrder.LITTLE_ENDIAN);
        while (buffer.hasRemaining()) {
            if (file.read(buffer, offset + buffer.position()) < 0) {
                throw new IOException(library + " ended early");
            }
        }
        return buffer.flip();
    }
}
