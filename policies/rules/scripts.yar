// Scripts a user could be talked into running.
rule interpreter_script
{
    meta:
        description = "Script with an interpreter line (#!)"
        severity = "script"
    condition:
        uint16(0) == 0x2123
}

rule windows_script
{
    meta:
        description = "PowerShell, VBScript, JScript, batch or HTA content"
        severity = "script"
    strings:
        $ps1 = "Invoke-Expression" nocase
        $ps2 = "-EncodedCommand" nocase
        $ps3 = "IEX(" nocase
        $ps4 = "Net.WebClient" nocase
        $ps5 = "DownloadString(" nocase
        $vbs1 = "WScript.Shell" nocase
        $vbs2 = "WScript.CreateObject" nocase
        $js1 = "ActiveXObject(" nocase
        $bat1 = "@echo off" nocase
        $hta = "<hta:application" nocase
    condition:
        filesize < 10MB and any of them
}
