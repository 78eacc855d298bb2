// Programs: a released file never gets the execute bit, but an operator
// should still see that it is one.
rule windows_pe_executable
{
    meta:
        description = "Windows PE executable or DLL (MZ header pointing at a PE signature)"
        severity = "executable"
    condition:
        filesize > 0x40 and uint16(0) == 0x5A4D
        and uint32(0x3C) < filesize - 4
        and uint32(uint32(0x3C)) == 0x00004550
}

rule elf_executable
{
    meta:
        description = "ELF executable, shared object or core file"
        severity = "executable"
    condition:
        uint32(0) == 0x464C457F
}

rule macho_executable
{
    meta:
        description = "Mach-O executable (macOS)"
        severity = "executable"
    condition:
        uint32(0) == 0xFEEDFACF or uint32(0) == 0xFEEDFACE
        or uint32(0) == 0xCFFAEDFE or uint32(0) == 0xCEFAEDFE
}
