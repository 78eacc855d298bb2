// Archives whose contents cannot be scanned because they are encrypted.
rule zip_encrypted_entry
{
    meta:
        description = "ZIP archive with a password-protected entry"
        severity = "encrypted"
    strings:
        $local = { 50 4B 03 04 }
    condition:
        uint32(0) == 0x04034B50
        and for any i in (1..#local) : ((uint16(@local[i] + 6) & 0x1) == 0x1)
}

rule seven_zip_encrypted
{
    meta:
        description = "7-Zip archive using AES (password-protected)"
        severity = "encrypted"
    strings:
        $aes = { 06 F1 07 01 }
    condition:
        uint32(0) == 0xAFBC7A37 and uint16(4) == 0x1C27 and $aes
}

rule rar_encrypted
{
    meta:
        description = "RAR archive with encrypted headers"
        severity = "encrypted"
    condition:
        uint32(0) == 0x21726152 and uint16(4) == 0x071A
        and (
            // RAR 4: main header (type 0x73) with the block-encryption flag
            (uint8(6) == 0x00 and uint8(9) == 0x73 and (uint16(10) & 0x0080) != 0)
            // RAR 5: the first header is the archive encryption header (type 4)
            or (uint8(6) == 0x01 and uint8(7) == 0x00 and uint8(13) == 0x04)
        )
}
