package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import org.junit.jupiter.api.Test;

class TorchScriptArchiveTest {

    @Test
    void archiveHoldsTheFourStoredEntriesUnderOneFolder() throws IOException {
        byte[] archive = TorchScriptArchive.build("Foo", "class Foo(Module):\n  pass\n");
        List<String> names = new ArrayList<>();
        try (ZipInputStream zip = new ZipInputStream(new ByteArrayInputStream(archive))) {
            for (ZipEntry e = zip.getNextEntry(); e != null; e = zip.getNextEntry()) {
                names.add(e.getName());
                assertEquals(ZipEntry.STORED, e.getMethod(), e.getName());
                if (e.getName().endsWith("version")) {
                    assertEquals("3\n", new String(zip.readAllBytes(), StandardCharsets.US_ASCII));
                }
            }
        }
        assertEquals(
                List.of(
                        "foo/data.pkl",
                        "foo/code/__torch__.py",
                        "foo/constants.pkl",
                        "foo/version"),
                names);
    }

    @Test
    void modulePickleBuildsTheClassWithTrainingTrue() {
        byte[] expected = {
            (byte) 0x80,
            2,
            'c',
            '_',
            '_',
            't',
            'o',
            'r',
            'c',
            'h',
            '_',
            '_',
            '\n',
            'F',
            'o',
            'o',
            '\n',
            ')',
            (byte) 0x81,
            '}',
            'X',
            8,
            0,
            0,
            0,
            't',
            'r',
            'a',
            'i',
            'n',
            'i',
            'n',
            'g',
            (byte) 0x88,
            's',
            'b',
            '.'
        };
        assertArrayEquals(expected, TorchScriptArchive.modulePickle("Foo"));
        assertArrayEquals(
                new byte[] {(byte) 0x80, 2, ')', '.'}, TorchScriptArchive.emptyTuplePickle());
    }

    @Test
    void classNameMustBeAnIdentifier() {
        assertThrows(IllegalArgumentException.class, () -> TorchScriptArchive.build("a.b", ""));
    }
}
