package io.github.djlamp.amp.pytorch;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * Writes a TorchScript archive, the zip file {@code torch.jit.save} produces, for a module with no
 * parameters, from its TorchScript source.
 *
 * <p>The archive holds, under one top-level folder: {@code data.pkl} (a protocol-2 pickle of the
 * module object: class {@code __torch__.NAME} built from a dict holding {@code training: True}),
 * {@code code/__torch__.py} (the class source), {@code constants.pkl} (an empty tuple) and {@code
 * version}. Entries are stored uncompressed, as PyTorch writes them.
 */
final class TorchScriptArchive {

    private static final int FILE_FORMAT_VERSION = 3;

    private TorchScriptArchive() {}

    /**
     * Builds the archive bytes.
     *
     * @param className the module's class name, a Python identifier, defined in {@code source}
     * @param source the TorchScript source of {@code code/__torch__.py}
     * @return the archive, ready for {@code torch::jit::load}
     */
    static byte[] build(String className, String source) {
        if (!className.matches("[A-Za-z_][A-Za-z0-9_]*")) {
            throw new IllegalArgumentException("Not a Python identifier: " + className);
        }
        String root = className.toLowerCase(java.util.Locale.ROOT) + "/";
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ZipOutputStream zip = new ZipOutputStream(bytes)) {
            putStored(zip, root + "data.pkl", modulePickle(className));
            putStored(zip, root + "code/__torch__.py", source.getBytes(StandardCharsets.UTF_8));
            putStored(zip, root + "constants.pkl", emptyTuplePickle());
            putStored(
                    zip,
                    root + "version",
                    (FILE_FORMAT_VERSION + "\n").getBytes(StandardCharsets.US_ASCII));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    /** {@code __torch__.NAME.__new__(); obj.__setstate__({'training': True})} as pickle opcodes. */
    static byte[] modulePickle(String className) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(0x80); // PROTO
        out.write(2);
        out.write('c'); // GLOBAL module\nname\n
        out.writeBytes(("__torch__\n" + className + "\n").getBytes(StandardCharsets.US_ASCII));
        out.write(')'); // EMPTY_TUPLE
        out.write(0x81); // NEWOBJ
        out.write('}'); // EMPTY_DICT
        byte[] key = "training".getBytes(StandardCharsets.US_ASCII);
        out.write('X'); // BINUNICODE, 4-byte little-endian length
        out.write(key.length);
        out.write(0);
        out.write(0);
        out.write(0);
        out.writeBytes(key);
        out.write(0x88); // NEWTRUE
        out.write('s'); // SETITEM
        out.write('b'); // BUILD
        out.write('.'); // STOP
        return out.toByteArray();
    }

    static byte[] emptyTuplePickle() {
        return new byte[] {(byte) 0x80, 2, ')', '.'};
    }

    private static void putStored(ZipOutputStream zip, String name, byte[] data)
            throws IOException {
        ZipEntry entry = new ZipEntry(name);
        entry.setMethod(ZipEntry.STORED);
        entry.setSize(data.length);
        entry.setCompressedSize(data.length);
        CRC32 crc = new CRC32();
        crc.update(data);
        entry.setCrc(crc.getValue());
        zip.putNextEntry(entry);
        zip.write(data);
        zip.closeEntry();
    }
}
