// The EICAR anti-malware test file: harmless, and every scanner must flag it.
rule eicar_test_file
{
    meta:
        description = "EICAR anti-malware test file"
        severity = "malware"
    strings:
        $eicar = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
    condition:
        $eicar
}
