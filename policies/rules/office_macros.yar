// Office documents that carry VBA macros.
rule office_ole_with_vba_macros
{
    meta:
        description = "OLE2 Office document (doc, xls, ppt) with a VBA macro project"
        severity = "macro"
    strings:
        $project = "_VBA_PROJECT" ascii wide
        $name = "Attribute VB_Name" ascii
        $dir = "VBA" wide
    condition:
        uint32(0) == 0xE011CFD0 and uint32(4) == 0xE11AB1A1
        and ($project or $name or #dir > 2)
}

rule office_openxml_with_macros
{
    meta:
        description = "Office Open XML document (docm, xlsm, pptm) carrying vbaProject.bin"
        severity = "macro"
    strings:
        $bin = "vbaProject.bin" ascii nocase
    condition:
        uint32(0) == 0x04034B50 and $bin
}
